/**
 * Signals to one job, events to every job that waits, and triggers, judged
 * at each decision the core makes against a model of what it must hold.
 *
 * The model (signals held per job, oldest first; the signal or event wait
 * of each WAITING job; the triggers) follows the live core, uncommitted
 * writes included: each change is an operation staged with the batch being
 * built, applied to a second, committed model when that batch commits, and
 * after a crash the live model is the committed one again (a batch that
 * never committed never happened). Every signal a simulated client sends
 * carries a payload `{sig: n}` with a number of its own, so the signal a
 * wait's step records names the signal it took.
 *
 * The rules:
 * (a) a signal the job's wait of its name is not waiting for is held; a
 *     wait that begins takes the oldest held signal of its name at once
 *     (and is waiting only when none is held); a signal is taken by the
 *     wait waiting for it (resumed). The step a taking wait records (seen
 *     once committed) names exactly that signal, sent to that job with that
 *     name, and no other step ever names it. `signalsHeld` in each reply is
 *     the model's count, and after a restart each job's snapshot shows the
 *     committed model's held signals and wait: a held signal survives.
 * (b) a publish makes one job per trigger of its name in the model at that
 *     moment; every reply released for one eventId reports the same jobs
 *     and resumed count, those of the committed event.
 * (c) a publish resumes every job waiting for its name (and key, when the
 *     wait names one) at that moment, except those whose timeout had passed
 *     (they may be resumed by it or time out), and no other; the committed
 *     step names that event. A wait that begins later is not resumed by it
 *     (it is not in the model's waits when the event comes).
 * (d) a wait resumed by neither timed out: only at or after its untilMs,
 *     on a timed input, recording null; after a timed input no wait whose
 *     time has come is left waiting.
 */
import type { CoreEvent, Effect } from '../../src/coordinator/core/types.js';
import { EVENT_WAIT_STEP, SIGNAL_WAIT_STEP } from '../../src/coordinator/core/step-names.js';
import type {
  ClientReply,
  ClientRequest,
  JobSnapshot,
  PublishEvent,
  SignalJob,
} from '../../src/protocol/messages.js';
import type { MemoryStore } from '../../src/store/memory-store.js';
import type { Judge } from './violation.js';
import type { HandledInput } from './world.js';

interface Wait {
  readonly kind: 'signal' | 'event';
  readonly name: string;
  readonly key: string | null;
  readonly untilMs: number | null;
  readonly beganAtMs: number;
}

interface Held {
  readonly n: number;
  readonly name: string;
}

/** What a wait's committed step must show once it ended. */
type Outcome =
  | { readonly by: 'signal'; readonly n: number; readonly name: string }
  | {
      readonly by: 'event';
      readonly eventId: string;
      readonly name: string;
      readonly key: string | null;
    }
  | { readonly by: 'timeout' };

type Op =
  | { readonly op: 'trigger'; readonly name: string; readonly event: string | null }
  | { readonly op: 'held'; readonly jobId: string; readonly signal: Held }
  | { readonly op: 'take'; readonly jobId: string; readonly n: number }
  | { readonly op: 'begin'; readonly jobId: string; readonly wait: Wait }
  | {
      readonly op: 'end';
      readonly jobId: string;
      readonly kind: Wait['kind'];
      readonly outcome: Outcome;
    }
  | { readonly op: 'gone'; readonly jobId: string }
  | { readonly op: 'event'; readonly jobs: number; readonly resumed: number };

class Model {
  readonly triggers = new Map<string, string>();
  readonly held = new Map<string, Held[]>();
  readonly waits = new Map<string, Wait>();

  clone(): Model {
    const copy = new Model();
    for (const [k, v] of this.triggers) copy.triggers.set(k, v);
    for (const [k, v] of this.held) copy.held.set(k, [...v]);
    for (const [k, v] of this.waits) copy.waits.set(k, v);
    return copy;
  }

  apply(op: Op): void {
    switch (op.op) {
      case 'trigger':
        if (op.event === null) this.triggers.delete(op.name);
        else this.triggers.set(op.name, op.event);
        return;
      case 'held': {
        const list = this.held.get(op.jobId) ?? [];
        list.push(op.signal);
        this.held.set(op.jobId, list);
        return;
      }
      case 'take': {
        const list = (this.held.get(op.jobId) ?? []).filter((s) => s.n !== op.n);
        if (list.length === 0) this.held.delete(op.jobId);
        else this.held.set(op.jobId, list);
        return;
      }
      case 'begin':
        this.waits.set(op.jobId, op.wait);
        return;
      case 'end':
        this.waits.delete(op.jobId);
        return;
      case 'gone':
        this.waits.delete(op.jobId);
        this.held.delete(op.jobId);
        return;
      case 'event':
        return;
    }
  }
}

/** A wait the quiet phase's clients may end: what a job waits for. */
export interface WaitingJob {
  readonly jobId: string;
  readonly kind: 'signal' | 'event';
  readonly name: string;
  readonly key: string | null;
}

/** Signal names, event names and keys the simulated handlers and clients use (small pools). */
export const SIGNAL_NAMES = ['s0', 's1'] as const;
export const EVENT_NAMES = ['e0', 'e1', 'e2'] as const;
export const EVENT_KEYS = ['k0', 'k1'] as const;
/** Trigger names the clients set and delete. */
export const TRIGGER_NAMES = ['t0', 't1', 't2'] as const;

const replyKey = (connId: number, requestId: number): string => `${connId}/${requestId}`;

/** The number a simulated signal's payload carries (`{sig: n}`), or null. */
function signalNumber(payload: unknown): number | null {
  const n = (payload as { sig?: unknown } | null)?.sig;
  return typeof n === 'number' ? n : null;
}

export interface SignalCounts {
  signals: number;
  taken: number;
  events: number;
  woken: number;
  triggerJobs: number;
  timedOut: number;
}

export class SignalChecks {
  readonly #judge: Judge;
  readonly #store: MemoryStore;
  /** Whether the job has ended (in the live core). */
  readonly #ended: (jobId: string) => boolean;
  #live = new Model();
  readonly #committed = new Model();
  #building: Op[] = [];
  readonly #inFlight = new Map<number, Op[]>();
  /** SIGNAL_JOB and PUBLISH_EVENT requests handled, not answered yet (answered after a read). */
  readonly #requests = new Map<string, SignalJob | PublishEvent>();
  /** Replies of accepted signals not released yet: the signal's number. */
  readonly #unreleased = new Map<string, number>();
  /** Each signal: the job and name it was sent with (accepted by the core). */
  readonly #sentTo = new Map<number, { jobId: string; name: string }>();
  /** Signals acknowledged to their client, by number: their job. */
  readonly #acked = new Map<number, string>();
  /** Committed: the step (job/index) that took each signal. */
  readonly #takenBy = new Map<number, string>();
  /** The first reply released for each event id. */
  readonly #eventReplies = new Map<string, string>();
  readonly counts: SignalCounts = {
    signals: 0,
    taken: 0,
    events: 0,
    woken: 0,
    triggerJobs: 0,
    timedOut: 0,
  };

  constructor(judge: Judge, store: MemoryStore, ended: (jobId: string) => boolean) {
    this.#judge = judge;
    this.#store = store;
    this.#ended = ended;
  }

  /** The waits of the live core (for the quiet phase's clients). */
  waiting(): WaitingJob[] {
    return [...this.#live.waits].map(([jobId, w]) => ({ jobId, ...w }));
  }

  /** Jobs the live model holds something for (waits, signals). */
  jobs(): string[] {
    return [...new Set([...this.#live.waits.keys(), ...this.#live.held.keys()])];
  }

  #do(op: Op): void {
    this.#live.apply(op);
    this.#building.push(op);
  }

  onHandled(h: HandledInput): void {
    const input = h.input;
    const judge = this.#judge;
    if (
      input.kind === 'clientRequest' &&
      (input.msg.type === 'SIGNAL_JOB' || input.msg.type === 'PUBLISH_EVENT')
    ) {
      this.#requests.set(replyKey(input.connId, input.requestId), input.msg);
    }
    const replies = new Map<string, ClientReply>();
    const events: CoreEvent[] = [];
    for (const effect of h.effects) {
      if (effect.kind === 'reply')
        replies.set(replyKey(effect.connId, effect.requestId), effect.msg);
      if (effect.kind === 'event') events.push(effect.event);
    }
    const resumed = new Set<string>();
    for (const e of events) if (e.type === 'job.resumed') resumed.add(e.jobId);
    const explained = new Set<string>();
    if (input.kind === 'clientRequest')
      this.#triggerRequest(input.msg, replies.get(replyKey(input.connId, input.requestId)));
    for (const e of events) {
      if (e.type === 'job.signalled') this.#signalled(e, replies, resumed, explained);
      if (e.type === 'event.published') this.#published(e, h, replies, resumed, explained);
    }
    if (input.kind === 'workerMessage' && input.msg.type === 'TASK_SUSPEND') {
      const msg = input.msg;
      const suspended = events.find((e) => e.type === 'job.suspended' && e.jobId === msg.jobId);
      if (suspended?.type === 'job.suspended') {
        if (msg.waitForSignal != null || msg.waitForEvent != null) {
          this.#waitBegins(msg.jobId, msg, suspended.untilMs, h.nowMs, resumed, explained);
        }
      }
    }
    for (const jobId of resumed) {
      if (explained.has(jobId)) continue;
      // (d) Neither a signal nor an event: its timeout, which must have come.
      const wait = this.#live.waits.get(jobId);
      judge.check(
        wait !== undefined &&
          wait.untilMs !== null &&
          wait.untilMs <= h.nowMs &&
          (input.kind === 'tick' || input.kind === 'wake'),
        () =>
          `job ${jobId} resumed on ${input.kind} at ${h.nowMs} by no signal or event; its wait: ${JSON.stringify(wait)}`,
      );
      if (wait === undefined) continue;
      this.#do({ op: 'end', jobId, kind: wait.kind, outcome: { by: 'timeout' } });
    }
    if (input.kind === 'tick' || input.kind === 'wake') {
      for (const [jobId, wait] of this.#live.waits) {
        if (wait.untilMs !== null && wait.untilMs <= h.nowMs && !this.#ended(jobId)) {
          throw judge.violation(
            `after a timed input at ${h.nowMs}, job ${jobId} still waits for ${wait.kind} ${wait.name} until ${wait.untilMs}`,
          );
        }
      }
    }
    for (const jobId of this.jobs()) {
      if (this.#ended(jobId)) this.#do({ op: 'gone', jobId });
    }
    for (const key of replies.keys()) this.#requests.delete(key);
  }

  #triggerRequest(msg: ClientRequest, reply: ClientReply | undefined): void {
    const judge = this.#judge;
    if (msg.type === 'SET_TRIGGER' && reply?.type === 'TRIGGER_INFO') {
      this.#do({ op: 'trigger', name: reply.trigger.name, event: reply.trigger.event });
    } else if (msg.type === 'DELETE_TRIGGER' && reply?.type === 'TRIGGER_DELETED') {
      judge.check(
        reply.deleted === this.#live.triggers.has(msg.name),
        () => `DELETE_TRIGGER ${msg.name} answered deleted ${reply.deleted}; the model disagrees`,
      );
      if (reply.deleted) this.#do({ op: 'trigger', name: msg.name, event: null });
    } else if (msg.type === 'LIST_TRIGGERS' && reply?.type === 'TRIGGER_LIST') {
      const listed = reply.triggers.map((t) => `${t.name}:${t.event}`).join(',');
      const model = [...this.#live.triggers]
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
        .map(([name, event]) => `${name}:${event}`)
        .join(',');
      judge.check(listed === model, () => `TRIGGER_LIST [${listed}], the model has [${model}]`);
    }
  }

  /** The reply (and its request) among this input's effects for a signal to `jobId`. */
  #signalled(
    e: Extract<CoreEvent, { type: 'job.signalled' }>,
    replies: Map<string, ClientReply>,
    resumed: Set<string>,
    explained: Set<string>,
  ): void {
    const judge = this.#judge;
    let found: {
      key: string;
      reply: Extract<ClientReply, { type: 'JOB_SIGNALLED' }>;
      n: number;
    } | null = null;
    for (const [key, reply] of replies) {
      const request = this.#requests.get(key);
      if (
        reply.type !== 'JOB_SIGNALLED' ||
        reply.jobId !== e.jobId ||
        request?.type !== 'SIGNAL_JOB'
      )
        continue;
      const n = signalNumber(request.payload);
      if (n !== null && !this.#sentTo.has(n)) found = { key, reply, n };
    }
    if (found === null)
      throw judge.violation(`job.signalled ${e.jobId} ${e.name} without its reply`);
    const { key, reply, n } = found;
    const jobId = e.jobId;
    const wait = this.#live.waits.get(jobId);
    const waitsForIt = wait?.kind === 'signal' && wait.name === e.name;
    const heldSame = (this.#live.held.get(jobId) ?? []).filter((s) => s.name === e.name);
    judge.check(
      e.resumed === waitsForIt && reply.resumed === e.resumed && e.resumed === resumed.has(jobId),
      () =>
        `signal ${n} ${e.name} to ${jobId}: resumed ${e.resumed} (reply ${reply.resumed}); the model's wait is ${JSON.stringify(wait)}`,
    );
    judge.check(
      !e.resumed || heldSame.length === 0,
      () =>
        `signal ${n} ${e.name} resumed ${jobId}, which held ${heldSame.map((s) => s.n).join(', ')} of that name`,
    );
    this.#sentTo.set(n, { jobId, name: e.name });
    this.#unreleased.set(key, n);
    if (e.resumed) {
      explained.add(jobId);
      this.#do({ op: 'end', jobId, kind: 'signal', outcome: { by: 'signal', n, name: e.name } });
    } else {
      this.#do({ op: 'held', jobId, signal: { n, name: e.name } });
    }
    const held = this.#live.held.get(jobId)?.length ?? 0;
    judge.check(
      reply.signalsHeld === held,
      () => `JOB_SIGNALLED ${jobId} says ${reply.signalsHeld} held, the model ${held}`,
    );
  }

  #published(
    e: Extract<CoreEvent, { type: 'event.published' }>,
    h: HandledInput,
    replies: Map<string, ClientReply>,
    resumed: Set<string>,
    explained: Set<string>,
  ): void {
    const judge = this.#judge;
    let msg: PublishEvent | undefined;
    let reply: Extract<ClientReply, { type: 'EVENT_PUBLISHED' }> | undefined;
    for (const [key, r] of replies) {
      const request = this.#requests.get(key);
      if (
        r.type === 'EVENT_PUBLISHED' &&
        r.eventId === e.eventId &&
        r.duplicate !== true &&
        request?.type === 'PUBLISH_EVENT'
      ) {
        // (Publishes of its id held behind its lookup are answered in the same input, as duplicates.)
        msg = request;
        reply = r;
      }
    }
    if (msg === undefined || reply === undefined) {
      throw judge.violation(`event.published ${e.eventId} without its reply`);
    }
    const key = msg.key ?? null;
    // (b) One job per trigger of its name.
    const triggers = [...this.#live.triggers.values()].filter((event) => event === e.name).length;
    judge.check(
      e.jobs === triggers && reply.jobIds.length === triggers && reply.duplicate !== true,
      () =>
        `event ${e.eventId} ${e.name} made ${e.jobs} jobs (reply ${reply?.jobIds.length}); ${triggers} triggers of that name`,
    );
    // (c) Every job waiting for it is resumed (unless its timeout had passed), and no other.
    let matched = 0;
    for (const [jobId, wait] of this.#live.waits) {
      if (wait.kind !== 'event' || wait.name !== e.name) continue;
      if (wait.key !== null && wait.key !== key) continue;
      // One resumed now may end in the same input (its expiry had passed while it waited).
      if (this.#ended(jobId) && !resumed.has(jobId)) continue;
      const late = wait.untilMs !== null && wait.untilMs <= h.nowMs;
      if (!resumed.has(jobId) || explained.has(jobId)) {
        judge.check(
          late,
          () =>
            `event ${e.eventId} ${e.name} key ${key} at ${h.nowMs} did not resume ${jobId}, which waits for it since ${wait.beganAtMs}`,
        );
        continue;
      }
      matched++;
      explained.add(jobId);
      this.#do({
        op: 'end',
        jobId,
        kind: 'event',
        outcome: { by: 'event', eventId: e.eventId, name: e.name, key },
      });
    }
    judge.check(
      e.resumed === matched && reply.resumed === matched,
      () =>
        `event ${e.eventId} ${e.name} key ${key} resumed ${e.resumed} (reply ${reply?.resumed}); ${matched} of its waiters were`,
    );
    this.#do({ op: 'event', jobs: e.jobs, resumed: e.resumed });
  }

  #waitBegins(
    jobId: string,
    msg: {
      waitForSignal?: { name: string } | null;
      waitForEvent?: { name: string; key?: string | null } | null;
    },
    untilMs: number | null,
    nowMs: number,
    resumed: Set<string>,
    explained: Set<string>,
  ): void {
    const judge = this.#judge;
    const kind = msg.waitForSignal != null ? 'signal' : 'event';
    const w = (msg.waitForSignal ?? msg.waitForEvent) as { name: string; key?: string | null };
    const wait: Wait = { kind, name: w.name, key: w.key ?? null, untilMs, beganAtMs: nowMs };
    this.#do({ op: 'begin', jobId, wait });
    if (kind === 'event') {
      judge.check(
        !resumed.has(jobId) || explained.has(jobId),
        () => `job ${jobId} began to wait for event ${w.name} and was resumed at once`,
      );
      return;
    }
    const oldest = (this.#live.held.get(jobId) ?? []).find((s) => s.name === w.name);
    const taken = resumed.has(jobId) && !explained.has(jobId);
    judge.check(
      taken === (oldest !== undefined),
      () =>
        `job ${jobId} began to wait for signal ${w.name} holding ${JSON.stringify(this.#live.held.get(jobId) ?? [])}; resumed at once: ${taken}`,
    );
    if (oldest === undefined || !taken) return;
    explained.add(jobId);
    this.#do({ op: 'take', jobId, n: oldest.n });
    this.#do({
      op: 'end',
      jobId,
      kind: 'signal',
      outcome: { by: 'signal', n: oldest.n, name: w.name },
    });
  }

  onFlushed(batchId: number | null): void {
    const ops = this.#building;
    this.#building = [];
    if (batchId !== null) this.#inFlight.set(batchId, ops);
    else {
      this.#judge.check(
        ops.every((op) => op.op === 'gone'),
        () =>
          `a batch with nothing to write changed signals, waits or triggers: ${JSON.stringify(ops)}`,
      );
      for (const op of ops) this.#committed.apply(op);
    }
  }

  onCommitted(batchId: number): void {
    const ops = this.#inFlight.get(batchId);
    this.#inFlight.delete(batchId);
    for (const op of ops ?? []) {
      this.#committed.apply(op);
      if (op.op === 'end') this.#checkEnded(op);
      if (op.op === 'event') {
        this.counts.triggerJobs += op.jobs;
        this.counts.woken += op.resumed;
      }
    }
  }

  /** The committed step of a wait that ended shows how (taken signals once each). */
  #checkEnded(op: Extract<Op, { op: 'end' }>): void {
    const judge = this.#judge;
    const steps = this.#store.committedSteps(op.jobId);
    const index = steps.length - 1;
    const step = steps[index];
    const stepName = op.kind === 'signal' ? SIGNAL_WAIT_STEP : EVENT_WAIT_STEP;
    const value = JSON.parse(step?.result ?? 'null') as {
      signal?: { name: string; payload: unknown; atMillis: number } | null;
      event?: { name: string; key: string | null; eventId: string; atMillis: number } | null;
    } | null;
    const what = (): string =>
      `job ${op.jobId}'s wait ended by ${JSON.stringify(op.outcome)}; its committed step ${index} is ${step?.name} ${step?.result}`;
    if (step?.name !== stepName || value === null) throw judge.violation(what());
    const outcome = op.outcome;
    switch (outcome.by) {
      case 'timeout':
        judge.check((op.kind === 'signal' ? value.signal : value.event) === null, what);
        this.counts.timedOut++;
        return;
      case 'event':
        judge.check(
          value.event?.eventId === outcome.eventId &&
            value.event.name === outcome.name &&
            value.event.key === outcome.key,
          what,
        );
        return;
      case 'signal': {
        const n = signalNumber(value.signal?.payload);
        const sent = this.#sentTo.get(outcome.n);
        judge.check(
          n === outcome.n &&
            value.signal?.name === outcome.name &&
            sent?.jobId === op.jobId &&
            sent.name === outcome.name,
          () => `${what()}; signal ${outcome.n} was sent to ${JSON.stringify(sent)}`,
        );
        const at = `${op.jobId}/${index}`;
        const before = this.#takenBy.get(outcome.n);
        judge.check(
          before === undefined || before === at,
          () => `signal ${outcome.n} taken by ${at}, and before by ${before}`,
        );
        if (before === undefined) this.counts.taken++;
        this.#takenBy.set(outcome.n, at);
        return;
      }
    }
  }

  onCrash(): void {
    this.#live = this.#committed.clone();
    this.#building = [];
    this.#inFlight.clear();
    this.#requests.clear();
    this.#unreleased.clear();
  }

  /** After a restart: each job's snapshot shows the committed model's held signals and wait. */
  checkSnapshot(jobId: string, snap: JobSnapshot | null): void {
    if (this.#ended(jobId)) return;
    const held = this.#live.held.get(jobId)?.length ?? 0;
    const wait = this.#live.waits.get(jobId);
    const w = snap?.waitingFor ?? null;
    this.#judge.check(
      snap !== null &&
        (snap.signalsHeld ?? 0) === held &&
        (wait === undefined
          ? w === null || (w.signal == null && w.event == null)
          : snap.state === 'WAITING' &&
            (wait.kind === 'signal' ? w?.signal : w?.event) === wait.name &&
            (wait.kind === 'signal' || (w?.key ?? null) === wait.key) &&
            (w?.untilMillis ?? null) === wait.untilMs),
      () =>
        `after a restart job ${jobId} shows ${JSON.stringify(snap)}; the model holds ${held} signals and waits ${JSON.stringify(wait)}`,
    );
  }

  /** A reply left for its client: acknowledged signals and events. */
  onReleased(effect: Effect): void {
    if (effect.kind !== 'reply') return;
    const msg = effect.msg;
    if (msg.type === 'JOB_SIGNALLED') {
      const key = replyKey(effect.connId, effect.requestId);
      const n = this.#unreleased.get(key);
      this.#unreleased.delete(key);
      if (n !== undefined) {
        this.#acked.set(n, msg.jobId);
        this.counts.signals++;
      }
      return;
    }
    if (msg.type !== 'EVENT_PUBLISHED') return;
    const judge = this.#judge;
    const seen = JSON.stringify({ jobIds: msg.jobIds, resumed: msg.resumed });
    const first = this.#eventReplies.get(msg.eventId);
    judge.check(
      first === undefined || first === seen,
      () => `EVENT_PUBLISHED ${msg.eventId} reports ${seen}, before ${first}`,
    );
    const stored = this.#store.readNow({ op: 'event', eventId: msg.eventId });
    const event = stored.op === 'event' ? stored.event : null;
    judge.check(
      event !== null &&
        JSON.stringify({ jobIds: event.jobIds, resumed: event.resumed }) === seen &&
        event.jobIds.every((jobId) => this.#store.committedJob(jobId) !== undefined),
      () =>
        `EVENT_PUBLISHED ${msg.eventId} ${seen} released; the store has ${JSON.stringify(event)}`,
    );
    if (first === undefined) {
      this.#eventReplies.set(msg.eventId, seen);
      this.counts.events++;
    }
  }

  /** At rest: every acknowledged signal was taken by one wait, or its job ended without. */
  quiescenceProblem(): string | null {
    for (const [n, jobId] of this.#acked) {
      if (!this.#takenBy.has(n) && !this.#ended(jobId)) {
        return `acknowledged signal ${n} to ${jobId} neither taken nor its job ended`;
      }
    }
    return null;
  }
}
