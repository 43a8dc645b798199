/**
 * Defences of the HTTP port against pages on other sites that a browser
 * visits, checked before any handler runs:
 *
 * - **Host** (against DNS rebinding: a name of the attacker's that resolves,
 *   later, to this coordinator's address, so the page becomes "same-origin"
 *   with it). A request is answered only when its Host names this
 *   coordinator: `localhost` and `*.localhost`, any IP literal (a rebinding
 *   page always has a name of its own; a browser that sends an IP literal was
 *   pointed at that address itself), the bind host and the advertised host,
 *   and the names given with `--http-allowed-hosts` (`name`, `.domain` for
 *   the domain and its subdomains, `*` for any name). The port is not part
 *   of the check. A request without Host (HTTP/1.0; Node refuses HTTP/1.1
 *   without one) comes from no browser and passes.
 * - **Origin** (against cross-site requests that act): a request with a
 *   method other than GET or HEAD is refused when its `Sec-Fetch-Site` is
 *   neither `same-origin` nor `none`, or its `Origin` is not this host (the
 *   name and port of the Host header; `null` never is). A request with
 *   neither header comes from no browser (curl, scripts) and passes.
 */
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';
import { HttpError, HttpErrorCode } from './responses.js';

/** Bind addresses that mean "every interface": no name of their own. */
const WILDCARDS = new Set(['', '0.0.0.0', '::', '[::]', '*']);

/** Methods that only read: never refused for their origin. */
const SAFE_METHODS = new Set(['GET', 'HEAD']);

/** A Host value split into a lower-case name (brackets removed) and its port (`''` = none). */
export interface HostParts {
  name: string;
  port: string;
}

/** Splits `name[:port]` or `[v6][:port]`; null when it is not a host. */
export function splitHost(value: string): HostParts | null {
  const text = value.trim().toLowerCase();
  let name: string;
  let rest: string;
  if (text.startsWith('[')) {
    const end = text.indexOf(']');
    if (end < 0) return null;
    name = text.slice(1, end);
    if (isIP(name) !== 6) return null;
    rest = text.slice(end + 1);
  } else {
    const colon = text.indexOf(':');
    name = colon < 0 ? text : text.slice(0, colon);
    rest = colon < 0 ? '' : text.slice(colon);
    if (!/^[a-z0-9_.-]+$/.test(name)) return null;
  }
  if (rest !== '' && !/^:[0-9]{1,5}$/.test(rest)) return null;
  return { name: name.replace(/\.$/, ''), port: rest.slice(1) };
}

/** One `--http-allowed-hosts` entry normalised (`name`, `.domain` or `*`); null when it is none of them. */
export function allowedHostEntry(entry: string): string | null {
  const text = entry.trim().toLowerCase();
  if (text === '*') return text;
  const domain = text.startsWith('.');
  const parts = splitHost(domain ? text.slice(1) : text);
  if (parts === null || parts.name === '' || parts.port !== '') return null;
  return domain ? `.${parts.name}` : parts.name;
}

export interface HostPolicyOptions {
  /** Entries of `--http-allowed-hosts` (already checked by {@link allowedHostEntry}). */
  allowedHosts: readonly string[];
  /** Names this coordinator goes by: its bind host and advertised host (wildcards are skipped). */
  ownNames: readonly string[];
}

/** Which Host and Origin values the HTTP port answers. */
export class HostPolicy {
  readonly #any: boolean;
  readonly #names = new Set<string>(['localhost']);
  readonly #domains: string[] = [];

  constructor(options: HostPolicyOptions) {
    this.#any = options.allowedHosts.includes('*');
    for (const own of options.ownNames) {
      const parts = WILDCARDS.has(own)
        ? null
        : splitHost(own.includes(':') && isIP(own) === 6 ? `[${own}]` : own);
      if (parts !== null) this.#names.add(parts.name);
    }
    for (const entry of options.allowedHosts) {
      if (entry.startsWith('.')) this.#domains.push(entry);
      else this.#names.add(entry);
    }
  }

  /** True when a Host value names this coordinator (see the module comment). */
  allowsHost(value: string): boolean {
    const parts = splitHost(value);
    if (parts === null) return false;
    const { name } = parts;
    if (this.#any || isIP(name) !== 0 || this.#names.has(name) || name.endsWith('.localhost'))
      return true;
    return this.#domains.some((d) => name === d.slice(1) || name.endsWith(d));
  }

  /**
   * The 403 a request gets, or null when it may go on. `host` is the
   * request's effective host (the absolute-form authority, else the Host
   * header; undefined when it has none).
   */
  refusal(req: IncomingMessage, host: string | undefined): HttpError | null {
    if (host !== undefined && !this.allowsHost(host)) {
      const message = `Host "${host.slice(0, 100)}" is not a name of this coordinator; add it with --http-allowed-hosts`;
      return new HttpError(403, HttpErrorCode.HostNotAllowed, message);
    }
    if (SAFE_METHODS.has(req.method ?? '')) return null;
    const reason = crossOriginReason(req, host);
    return reason === null ? null : new HttpError(403, HttpErrorCode.CrossOrigin, reason);
  }
}

function headerOf(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value.join(',') : value;
}

/** Why a request that acts is cross-origin, or null when it is same-origin or from no browser. */
function crossOriginReason(req: IncomingMessage, host: string | undefined): string | null {
  const site = headerOf(req, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin' && site !== 'none') {
    return `a ${site.slice(0, 20)} request may not act here (Sec-Fetch-Site)`;
  }
  const origin = headerOf(req, 'origin');
  if (origin === undefined) return null;
  const target = host === undefined ? null : splitHost(host);
  const from = originHost(origin);
  if (
    from === null ||
    target === null ||
    from.name !== target.name ||
    from.port !== defaultless(target.port)
  ) {
    return `Origin ${origin.slice(0, 100)} may not act here (not the origin of this page)`;
  }
  return null;
}

/** The host of an `Origin` value, with the scheme's default port as `''`; null for `null` or junk. */
function originHost(origin: string): HostParts | null {
  if (!/^https?:\/\//i.test(origin)) return null;
  try {
    const url = new URL(origin);
    const parts = splitHost(url.host);
    return parts === null ? null : { name: parts.name, port: defaultless(parts.port) };
  } catch {
    return null;
  }
}

/** 80 and 443 count as no port: a TLS-terminating proxy may sit between the two. */
function defaultless(port: string): string {
  return port === '80' || port === '443' ? '' : port;
}
