/**
 * Charts drawn as inline SVG (no chart library): a time series of one or
 * more lines over the last hour, and a horizontal bar. A value with no
 * value on either side (one bucket in which jobs ended, between buckets in
 * which none did) is drawn as a dot: a line needs two points. The legend
 * shows each series' latest value.
 */

export interface Series {
  name: string;
  /** One value per bucket; null = no data (a gap in the line). */
  values: (number | null)[];
  colour: string;
  dashed?: boolean;
  /** How the legend shows the latest value (default: up to one decimal). */
  format?: (value: number) => string;
}

export interface LineChartProps {
  title: string;
  series: Series[];
  /** Epoch ms of the first bucket and the bucket width. */
  startMillis: number;
  bucketMillis: number;
  /** Fixed top of the y axis; default: the data's maximum, rounded up. */
  yMax?: number;
  /** The y axis reaches at least this high (default 1). */
  yFloor?: number;
  unit: string;
  testId?: string;
}

const WIDTH = 600;
const HEIGHT = 160;
const PAD = { left: 40, right: 8, top: 8, bottom: 20 };

function niceMax(value: number): number {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (value <= step * magnitude) return step * magnitude;
  return 10 * magnitude;
}

function pathOf(
  values: (number | null)[],
  x: (i: number) => number,
  y: (v: number) => number,
): string {
  let d = '';
  let pen = false;
  values.forEach((value, i) => {
    if (value === null) {
      pen = false;
      return;
    }
    d += `${pen ? 'L' : 'M'}${x(i).toFixed(1)},${y(value).toFixed(1)}`;
    pen = true;
  });
  return d;
}

/** Indexes of values whose neighbours are both missing. */
function isolated(values: (number | null)[]): number[] {
  const out: number[] = [];
  values.forEach((value, i) => {
    if (value !== null && (values[i - 1] ?? null) === null && (values[i + 1] ?? null) === null) {
      out.push(i);
    }
  });
  return out;
}

function latestOf(values: (number | null)[]): number | null {
  for (let i = values.length - 1; i >= 0; i--) {
    const value = values[i];
    if (value !== null && value !== undefined) return value;
  }
  return null;
}

const oneDecimal = (value: number): string => String(Math.round(value * 10) / 10);

function minutesAgoLabel(i: number, count: number, bucketMillis: number): string {
  const minutes = Math.round(((count - 1 - i) * bucketMillis) / 60_000);
  return minutes === 0 ? 'now' : `-${minutes} min`;
}

export function LineChart(props: LineChartProps) {
  const count = Math.max(1, ...props.series.map((s) => s.values.length));
  const dataMax = Math.max(
    0,
    ...props.series.flatMap((s) => s.values.filter((v): v is number => v !== null)),
  );
  const yMax = props.yMax ?? niceMax(Math.max(dataMax, props.yFloor ?? 1));
  const plotW = WIDTH - PAD.left - PAD.right;
  const plotH = HEIGHT - PAD.top - PAD.bottom;
  const x = (i: number): number => PAD.left + (count === 1 ? 0 : (i / (count - 1)) * plotW);
  const y = (v: number): number => PAD.top + plotH - (Math.min(v, yMax) / yMax) * plotH;
  const ticks = [0, 0.5, 1].map((f) => f * yMax);
  const xTicks = [0, Math.floor((count - 1) / 2), count - 1];
  return (
    <figure class="chart" data-testid={props.testId}>
      <figcaption>
        {props.title}
        <span class="legend">
          {props.series.map((s) => {
            const latest = latestOf(s.values);
            return (
              <span key={s.name} data-series={s.name} data-latest={latest ?? ''}>
                <i style={{ background: s.colour }} /> {s.name}
                {latest !== null && <b>{(s.format ?? oneDecimal)(latest)}</b>}
              </span>
            );
          })}
        </span>
      </figcaption>
      <svg viewBox={`0 0 ${WIDTH} ${HEIGHT}`} role="img" aria-label={props.title}>
        {ticks.map((t) => (
          <g key={t}>
            <line class="grid" x1={PAD.left} x2={WIDTH - PAD.right} y1={y(t)} y2={y(t)} />
            <text class="axis" x={PAD.left - 4} y={y(t) + 3} text-anchor="end">
              {Number.isInteger(t) ? t : t.toFixed(1)}
            </text>
          </g>
        ))}
        {xTicks.map((i) => (
          <text
            key={i}
            class="axis"
            x={x(i)}
            y={HEIGHT - 4}
            text-anchor={i === 0 ? 'start' : i === count - 1 ? 'end' : 'middle'}
          >
            {minutesAgoLabel(i, count, props.bucketMillis)}
          </text>
        ))}
        {props.series.map((s) => (
          <g key={s.name} data-series={s.name}>
            <path
              d={pathOf(s.values, x, y)}
              fill="none"
              stroke={s.colour}
              stroke-width="1.6"
              stroke-dasharray={s.dashed === true ? '5 3' : undefined}
            />
            {isolated(s.values).map((i) => (
              <circle
                key={i}
                cx={x(i).toFixed(1)}
                cy={y(s.values[i] as number).toFixed(1)}
                r="2.5"
                fill={s.colour}
                data-value={s.values[i]}
              />
            ))}
          </g>
        ))}
      </svg>
      <div class="unit">{props.unit}</div>
    </figure>
  );
}

/** A labelled horizontal bar: `value` of `max`. */
export function Bar({
  label,
  value,
  max,
  colour,
}: {
  label: string;
  value: number;
  max: number;
  colour: string;
}) {
  const share = max <= 0 ? 0 : Math.min(1, value / max);
  return (
    <div class="bar-row">
      <span class="bar-label">{label}</span>
      <span class="bar-track">
        <span
          class="bar-fill"
          style={{ width: `${(share * 100).toFixed(1)}%`, background: colour }}
        />
      </span>
      <span class="bar-value">{value.toLocaleString()}</span>
    </div>
  );
}
