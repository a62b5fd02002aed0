/**
 * Money. Balances and prices are `numeric(18,4)` in Postgres; in JavaScript every sum and
 * comparison is made in whole ten-thousandths (units), so that adding prices never drifts.
 */
export const MONEY_SCALE = 10_000;

/** An amount as whole units (1 CZK = 10,000 units). */
export const toUnits = (amount: number): number => Math.round(amount * MONEY_SCALE);

export const fromUnits = (units: number): number => units / MONEY_SCALE;

/** An amount rounded to the four decimals a balance keeps (how events show prices). */
export const round4 = (amount: number): number => Math.round(amount * MONEY_SCALE) / MONEY_SCALE;

/** Units as an exact SQL numeric literal (`-12.0500`), for statements written with literals. */
export function unitsLiteral(units: number): string {
  if (!Number.isSafeInteger(units)) {
    throw new Error(`${units} is not a whole number of ten-thousandths`);
  }
  const abs = Math.abs(units);
  return `${units < 0 ? '-' : ''}${Math.trunc(abs / MONEY_SCALE)}.${String(abs % MONEY_SCALE).padStart(4, '0')}`;
}
