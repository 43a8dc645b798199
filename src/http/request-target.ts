/**
 * The request target of an HTTP request (the second word of its first line),
 * read without trusting it. Node's parser hands it over as the peer wrote it,
 * so anything may arrive: `http://[/`, `//[`, `http://a:99999/`, `*`. A
 * target this module cannot read is answered 400, never thrown.
 *
 * Two forms are accepted (RFC 9112, section 3.2): origin-form (`/path?query`,
 * read as a path even when it starts with `//`) and absolute-form
 * (`http://host/path`, whose authority then stands in for the Host header).
 * A path holds only the characters RFC 3986 allows in one (so `//[` is
 * refused) and well-formed percent escapes.
 */

/** `/`-separated segments of pchars (RFC 3986, section 3.3). */
const PATH = /^(?:\/(?:[A-Za-z0-9\-._~!$&'()*+,;=:@]|%[0-9A-Fa-f]{2})*)+$/;

/** A request target that could be read. */
export interface RequestTarget {
  /** The path, `/`-rooted, with dot segments resolved (percent escapes kept). */
  path: string;
  query: URLSearchParams;
  /** The `host[:port]` of an absolute-form target; null for origin-form. */
  authority: string | null;
}

/** Parses `raw`; null when it is neither origin-form nor an http(s) absolute-form URL. */
export function parseRequestTarget(raw: string | undefined): RequestTarget | null {
  if (raw === undefined || raw === '') return null;
  try {
    if (raw.startsWith('/')) {
      const query = raw.indexOf('?');
      if (!PATH.test(query < 0 ? raw : raw.slice(0, query))) return null;
      // Prefixed with a fixed origin, `//x` stays a path instead of naming a host.
      const url = new URL(`http://target.invalid${raw}`);
      return { path: url.pathname, query: url.searchParams, authority: null };
    }
    if (!/^https?:\/\//i.test(raw)) return null;
    const url = new URL(raw);
    if (url.host === '') return null;
    return { path: url.pathname, query: url.searchParams, authority: url.host };
  } catch {
    return null;
  }
}
