/**
 * `host:port` addresses as they appear on the command line (`--host
 * h1:7071,h2`), in `ERROR.leader` and in the lease: parsing with a default
 * port, formatting (IPv6 literals in brackets), and the lists that clients
 * and workers walk to find the leader.
 */
import { MAX_PORT } from '../protocol/limits.js';
import { LocalErrorCode } from '../protocol/error-codes.js';
import { DtpError } from '../protocol/errors.js';

export interface HostPort {
  host: string;
  port: number;
}

/** A malformed address or address list (a usage error where it came from a flag). */
export class AddressError extends DtpError {
  constructor(message: string) {
    super(LocalErrorCode.BadAddress, message);
  }
}

/** `host:port`, with an IPv6 literal in brackets (`[::1]:7071`). */
export function formatHostPort(address: HostPort): string {
  const host = address.host.includes(':') ? `[${address.host}]` : address.host;
  return `${host}:${address.port}`;
}

/** Parses `host`, `host:port`, `[v6]` or `[v6]:port`; the port defaults to `defaultPort`. */
export function parseHostPort(text: string, defaultPort: number): HostPort {
  const trimmed = text.trim();
  let host: string;
  let portText: string | null = null;
  const bracketed = /^\[([^\]]+)\](?::(.*))?$/.exec(trimmed);
  if (bracketed !== null) {
    host = bracketed[1] as string;
    portText = bracketed[2] ?? null;
  } else if ((trimmed.match(/:/g) ?? []).length > 1) {
    host = trimmed; // a bare IPv6 literal: no port
  } else {
    const colon = trimmed.lastIndexOf(':');
    host = colon < 0 ? trimmed : trimmed.slice(0, colon);
    portText = colon < 0 ? null : trimmed.slice(colon + 1);
  }
  if (host === '') throw new AddressError(`no host in ${JSON.stringify(text)}`);
  if (portText === null) return { host, port: defaultPort };
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : Number.NaN;
  if (!(port >= 1 && port <= MAX_PORT)) {
    throw new AddressError(`bad port in ${JSON.stringify(text)} (1..${MAX_PORT})`);
  }
  return { host, port };
}

/** `h1[:p1],h2[:p2],…` -> addresses, in order, duplicates dropped; at least one. */
export function parseAddressList(text: string, defaultPort: number): HostPort[] {
  const seen = new Set<string>();
  const out: HostPort[] = [];
  for (const part of text.split(',')) {
    if (part.trim() === '') continue;
    const address = parseHostPort(part, defaultPort);
    const key = formatHostPort(address);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(address);
  }
  if (out.length === 0) throw new AddressError(`no address in ${JSON.stringify(text)}`);
  return out;
}

/** True for an address that means "every interface" (not one to give others). */
export function isWildcardHost(host: string): boolean {
  return host === '' || host === '0.0.0.0' || host === '::' || host === '[::]';
}
