/**
 * JSON written as UTF-8 bytes straight into one buffer, the way the hot statements send event
 * bodies: all bodies of a statement in one text parameter, separated by U+0001 (see `eventsCtes`).
 *
 * Why bytes and not strings: the send path writes three bodies per recipient, and bodies built as
 * strings were flattened by V8 for the join and encoded again by pg (docs/benchmarks.md has the
 * measurements). A Buffer parameter travels to Postgres in binary format, which for `text` is the
 * UTF-8 bytes themselves.
 *
 * Strings are written exactly as JSON.stringify writes them (the event tests hold the bodies to
 * that byte for byte): printable ASCII byte by byte, anything else through JSON.stringify and the
 * UTF-8 encoder.
 */
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

export class JsonBytes {
  private buf: Buffer;
  private len = 0;

  constructor(initialBytes = 64 * 1024) {
    this.buf = Buffer.allocUnsafe(initialBytes);
  }

  /** Start over (the buffer is kept: a process writes batches of similar size all day). */
  reset(): void {
    this.len = 0;
  }

  /** A copy of what was written: the caller may hand it to pg, which may serialise it later. */
  toBuffer(): Buffer {
    return Buffer.from(this.buf.subarray(0, this.len));
  }

  /** What was written, in this writer's own memory: valid only until it is written again. */
  view(): Buffer {
    return this.buf.subarray(0, this.len);
  }

  toString(): string {
    return this.buf.toString('utf8', 0, this.len);
  }

  private ensure(more: number): void {
    if (this.len + more <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.len + more));
    this.buf.copy(grown, 0, 0, this.len);
    this.buf = grown;
  }

  byte(b: number): void {
    this.ensure(1);
    this.buf[this.len++] = b;
  }

  /** Bytes prepared once (the fixed parts of a body). */
  bytes(b: Uint8Array): void {
    this.ensure(b.length);
    this.buf.set(b, this.len);
    this.len += b.length;
  }

  /** Text known to be printable ASCII without `"` or `\` (keys, fixed words, number text). */
  ascii(s: string): void {
    this.ensure(s.length);
    const buf = this.buf;
    let at = this.len;
    for (let i = 0; i < s.length; i++) buf[at++] = s.charCodeAt(i);
    this.len = at;
  }

  /** Text written as it is, in UTF-8 (a stored JSON payload). */
  utf8(s: string): void {
    this.ensure(s.length * 3);
    this.len += this.buf.write(s, this.len, 'utf8');
  }

  /** `JSON.stringify(s)`. */
  string(s: string): void {
    this.ensure(s.length + 2);
    const buf = this.buf;
    let at = this.len;
    buf[at++] = QUOTE;
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c < 0x20 || c > 0x7e || c === QUOTE || c === BACKSLASH) {
        // Escapes, non-ASCII, lone surrogates: JSON.stringify decides, the encoder writes (over
        // what this loop wrote, from the opening quote on).
        this.utf8(JSON.stringify(s));
        return;
      }
      buf[at++] = c;
    }
    buf[at++] = QUOTE;
    this.len = at;
  }

  /** A number as JSON.stringify writes it (non-finite numbers as null). */
  number(n: number): void {
    if (Number.isSafeInteger(n) && n >= 0) {
      // Counts, codes and seconds: digits written directly, no string made for them.
      this.ensure(16);
      const buf = this.buf;
      let digits = 1;
      for (let rest = n; rest >= 10; rest = Math.floor(rest / 10)) digits++;
      let at = this.len + digits;
      this.len = at;
      let rest = n;
      do {
        buf[--at] = 0x30 + (rest % 10);
        rest = Math.floor(rest / 10);
      } while (rest > 0);
      return;
    }
    this.ascii(Number.isFinite(n) ? String(n) : 'null');
  }
}
