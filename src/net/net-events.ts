/**
 * What the network layer reports when a bound bites or a peer is refused:
 * data for metrics and (throttled) log lines, never text to parse.
 */

/** Which listening port an event concerns. */
export type PortName = 'worker' | 'client' | 'http';

/** Connections refused at accept, before any byte is read. */
export type RefusalLimit = 'max_connections' | 'per_address' | 'pending';

/** Bounds that end (or pause) an accepted connection. */
export type ConnectionLimit =
  /** TLS handshake plus AUTH/registration not done by the deadline. */
  | 'handshake_timeout'
  /** A started frame not finished in time. */
  | 'frame_timeout'
  /** The next frame's reservation does not fit the inbound budget: reading paused until it does (not closed). */
  | 'inbound_memory'
  /** A client connection with nothing in flight stayed silent too long. */
  | 'idle_timeout'
  /** Still pending and dropped to make room for a newcomer from a less busy address. */
  | 'pending_evicted'
  /** Unsent replies passed the per-connection bound: reading paused (not closed). */
  | 'unsent_replies'
  /** A peer that never reads let its unsent frames pass the hard cap: cut off. */
  | 'outbound_overflow';

export const REFUSAL_LIMITS: readonly RefusalLimit[] = [
  'max_connections',
  'per_address',
  'pending',
];
export const CONNECTION_LIMITS: readonly ConnectionLimit[] = [
  'handshake_timeout',
  'pending_evicted',
  'frame_timeout',
  'inbound_memory',
  'idle_timeout',
  'unsent_replies',
  'outbound_overflow',
];

export type NetEvent =
  | { type: 'connection.refused'; port: PortName; limit: RefusalLimit; remote: string }
  | {
      type: 'connection.limited';
      port: PortName;
      limit: ConnectionLimit;
      remote: string;
      /** For `unsent_replies`: the bytes owed when reading paused. */
      bytes?: number;
    }
  /** A TLS handshake ended; `error` is set when it failed. */
  | { type: 'tls.handshake'; port: PortName; remote: string; ok: boolean; error?: string }
  /** A subscriber left too many pushed events unread: `count` more were dropped (EVENTS_MISSED). */
  | { type: 'events.dropped'; port: PortName; remote: string; count: number }
  /** A token or client certificate was refused (the token itself is never part of it). */
  | { type: 'auth.refused'; port: PortName; remote: string; reason: string };

export type NetEventSink = (event: NetEvent) => void;
