/** A connection URL as logs and messages may show it: the password masked. */
export function redactUrl(raw: string): string {
  try {
    const url = new URL(raw);
    if (url.password) {
      url.password = '***';
    }
    return url.toString();
  } catch {
    return '(unparsable URL)';
  }
}
