/**
 * Numbered statement parameters by name. A hot statement's text is built once (it is a named
 * prepared statement); its parameters are listed by name in the order they are numbered, and the
 * values are given by name, so adding a column touches one list and the compiler checks that every
 * parameter gets a value.
 *
 *   const P = namedParams(['step', 'ids'] as const);
 *   const SQL = `UPDATE t SET step = ${P.$.step} WHERE id = ANY(${P.$.ids})`;   // $1, $2
 *   db.query(SQL, P.values({ step: 2, ids: '{1,2}' }));
 */
export interface NamedParams<N extends string> {
  /** `$<n>` of each name. */
  readonly $: Readonly<Record<N, string>>;
  /** The names in their numbered order. */
  readonly names: readonly N[];
  /** The values in numbered order. */
  values(values: Readonly<Record<N, unknown>>): unknown[];
}

export function namedParams<const N extends string>(names: readonly N[], first = 1): NamedParams<N> {
  const $ = {} as Record<N, string>;
  for (let i = 0; i < names.length; i++) {
    if (Object.hasOwn($, names[i]!)) throw new Error(`parameter ${names[i]} is listed twice`);
    $[names[i]!] = `$${first + i}`;
  }
  return {
    $,
    names,
    values(values) {
      const out: unknown[] = [];
      for (let i = 0; i < names.length; i++) out.push(values[names[i]!]);
      return out;
    },
  };
}
