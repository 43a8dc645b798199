/**
 * Metrics of the network guard: refused connections, bounds that bit, TLS
 * handshakes and refused authentications (counters, from the coordinator's
 * `net` events), and open / pending connections and the bytes held in partial
 * frames (gauges, read when scraped).
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import {
  CONNECTION_LIMITS,
  REFUSAL_LIMITS,
  type NetEvent,
  type PortName,
} from '../../net/net-events.js';
import { JOB_EVENT_KINDS, type JobEventKind } from '../../protocol/messages.js';

/** What the net metrics read; structural, so this module does not import the coordinator. */
export interface NetMetricsSource {
  readonly events: { on(name: 'net', listener: (event: NetEvent) => void): unknown };
  connectionCounts(): Record<'worker' | 'client', { open: number; pending: number }>;
  /** Job events handed to subscriptions so far, one per subscription, by kind. */
  pushedEvents(): Readonly<Record<JobEventKind, number>>;
  readonly guard: { readonly inboundBudget: { readonly usedBytes: number } };
}

const PORTS: readonly PortName[] = ['worker', 'client', 'http'];
const FRAMED_PORTS = ['worker', 'client'] as const;

export function registerNetMetrics(registry: Registry, source: NetMetricsSource): void {
  const registers = [registry];
  const refused = new Counter<'port' | 'limit'>({
    name: 'dtp_connections_refused_total',
    help: 'Connections refused at accept, by port and the bound that refused them',
    labelNames: ['port', 'limit'],
    registers,
  });
  const limited = new Counter<'port' | 'limit'>({
    name: 'dtp_connection_limits_total',
    help: 'Connections closed (or, for unsent_replies and inbound_memory, paused) by a bound, by port and bound',
    labelNames: ['port', 'limit'],
    registers,
  });
  const handshakes = new Counter<'port' | 'outcome'>({
    name: 'dtp_tls_handshakes_total',
    help: 'TLS handshakes by port and outcome (ok, failed)',
    labelNames: ['port', 'outcome'],
    registers,
  });
  const authRefused = new Counter<'port'>({
    name: 'dtp_auth_refused_total',
    help: 'Refused tokens, sessions and client certificates, by port',
    labelNames: ['port'],
    registers,
  });
  const dropped = new Counter({
    name: 'dtp_events_dropped_total',
    help: 'Job events not pushed to subscribers that had left too many unread (each was told how many it missed)',
    registers,
  });
  // Counted by the ports (a sum per event, nothing per subscriber); brought up to date when scraped.
  const counted: Record<JobEventKind, number> = { state: 0, progress: 0 };
  new Counter<'event'>({
    name: 'dtp_events_pushed_total',
    help: 'Job events handed to subscribers, one per matching subscription, by kind (state, progress); those a slow subscriber missed are in dtp_events_dropped_total too',
    labelNames: ['event'],
    registers,
    collect() {
      const now = source.pushedEvents();
      for (const event of JOB_EVENT_KINDS) {
        this.inc({ event }, now[event] - counted[event]);
        counted[event] = now[event];
      }
    },
  });
  for (const port of PORTS) {
    authRefused.inc({ port }, 0);
    for (const outcome of ['ok', 'failed']) handshakes.inc({ port, outcome }, 0);
  }
  for (const port of FRAMED_PORTS) {
    for (const limit of REFUSAL_LIMITS) refused.inc({ port, limit }, 0);
    for (const limit of CONNECTION_LIMITS) limited.inc({ port, limit }, 0);
  }
  source.events.on('net', (event) => {
    switch (event.type) {
      case 'connection.refused':
        refused.inc({ port: event.port, limit: event.limit });
        return;
      case 'connection.limited':
        limited.inc({ port: event.port, limit: event.limit });
        return;
      case 'tls.handshake':
        handshakes.inc({ port: event.port, outcome: event.ok ? 'ok' : 'failed' });
        return;
      case 'auth.refused':
        authRefused.inc({ port: event.port });
        return;
      case 'events.dropped':
        dropped.inc(event.count);
        return;
    }
  });
  new Gauge<'port' | 'state'>({
    name: 'dtp_connections',
    help: 'Open connections by port; state=pending: still in TLS, AUTH or registration',
    labelNames: ['port', 'state'],
    registers,
    collect() {
      const counts = source.connectionCounts();
      for (const port of FRAMED_PORTS) {
        this.set({ port, state: 'open' }, counts[port].open);
        this.set({ port, state: 'pending' }, counts[port].pending);
      }
    },
  });
  new Gauge({
    name: 'dtp_inbound_partial_frame_bytes',
    help: 'Bytes reserved for partly received frames over all connections (bounded by --max-inbound-bytes)',
    registers,
    collect() {
      this.set(source.guard.inboundBudget.usedBytes);
    },
  });
}
