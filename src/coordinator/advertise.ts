/**
 * The address others should use for a coordinator's port: the advertised
 * host when one is set, else the bind host unless it is a wildcard, else
 * this machine's name.
 */
import { hostname } from 'node:os';
import { formatHostPort, isWildcardHost } from '../net/address.js';

export function advertisedHost(options: {
  advertiseHost: string | null;
  bindHost: string;
}): string {
  const { advertiseHost, bindHost } = options;
  return advertiseHost ?? (isWildcardHost(bindHost) ? hostname() : bindHost);
}

/** `host:port` others should use for `port`. */
export function advertisedAddress(
  options: { advertiseHost: string | null; bindHost: string },
  port: number,
): string {
  return formatHostPort({ host: advertisedHost(options), port });
}
