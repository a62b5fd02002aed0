/**
 * The credential an `Authorization` header presents. The scheme's name is case-insensitive
 * (RFC 9110 11.1): `bearer` and `BASIC` too. Basic's credential is the password (the user name is
 * ignored), for browsers that know no other scheme.
 */
export function presentedCredential(header: string | undefined, schemes: { basic: boolean }): string {
  const value = header ?? '';
  const scheme = value.slice(0, value.indexOf(' ') + 1).toLowerCase();
  if (scheme === 'bearer ') return value.slice(7).trim();
  if (scheme === 'basic ' && schemes.basic) {
    const decoded = Buffer.from(value.slice(6), 'base64').toString('utf8');
    return decoded.slice(decoded.indexOf(':') + 1);
  }
  return '';
}
