/**
 * ISO 3166-1 alpha-2 → Mobile Country Code (ITU-T E.212).
 *
 * Events report a destination's `country` as its MCC. Where a country has
 * several MCCs the LOWEST one is used (US 310–316 → 310, IN 404–406 → 404,
 * GB 234–235 → 234, JP 440–441 → 440, CN 460–461 → 460, AE 424/430/431 → 424).
 *
 * Source: the E.212 list of MCCs assigned to geographical areas. A territory
 * with its own ITU assignment gets that MCC even where some operators there
 * use the parent's (PR 330, VI 332, GU 535, MP 534, AS 544, GF 742).
 * Territories without an own MCC that are served under a parent country's MCC
 * and that libphonenumber resolves as separate regions are listed with the
 * MCC used there (GG/IM/JE 234, AX 244, SJ 242, YT 647, BQ/SX 362, …), so
 * `mccOfE164` does not return 0 for them. Every region libphonenumber knows
 * has an entry; non-geographic numbers (+800, +882, …) map to 0.
 */
import { countryOfE164 } from './normalize.js';

const TABLE: ReadonlyArray<readonly [iso2: string, mcc: number]> = [
  // ---- 2xx: Europe
  ['GR', 202], ['NL', 204], ['BE', 206], ['FR', 208], ['MC', 212], ['AD', 213],
  ['ES', 214], ['HU', 216], ['BA', 218], ['HR', 219], ['RS', 220], ['XK', 221],
  ['IT', 222], ['VA', 225], ['RO', 226], ['CH', 228], ['CZ', 230], ['SK', 231],
  ['AT', 232], ['GB', 234], ['DK', 238], ['SE', 240], ['NO', 242], ['FI', 244],
  ['LT', 246], ['LV', 247], ['EE', 248], ['RU', 250], ['UA', 255], ['BY', 257],
  ['MD', 259], ['PL', 260], ['DE', 262], ['GI', 266], ['PT', 268], ['LU', 270],
  ['IE', 272], ['IS', 274], ['AL', 276], ['MT', 278], ['CY', 280], ['GE', 282],
  ['AM', 283], ['BG', 284], ['TR', 286], ['FO', 288], ['GL', 290], ['SM', 292],
  ['SI', 293], ['MK', 294], ['LI', 295], ['ME', 297],
  // served under a parent's MCC
  ['GG', 234], ['IM', 234], ['JE', 234], ['AX', 244], ['SJ', 242],

  // ---- 3xx: North America and the Caribbean
  ['CA', 302], ['PM', 308], ['US', 310], ['PR', 330], ['VI', 332], ['MX', 334],
  ['JM', 338], ['GP', 340], ['MQ', 340], ['BL', 340], ['MF', 340], ['BB', 342],
  ['AG', 344], ['KY', 346], ['VG', 348], ['BM', 350], ['GD', 352], ['MS', 354],
  ['KN', 356], ['LC', 358], ['VC', 360], ['CW', 362], ['AW', 363], ['BS', 364],
  ['AI', 365], ['DM', 366], ['CU', 368], ['DO', 370], ['HT', 372], ['TT', 374],
  ['TC', 376],
  // served under a parent's MCC (former Netherlands Antilles)
  ['BQ', 362], ['SX', 362],

  // ---- 4xx: Asia
  ['AZ', 400], ['KZ', 401], ['BT', 402], ['IN', 404], ['PK', 410], ['AF', 412],
  ['LK', 413], ['MM', 414], ['LB', 415], ['JO', 416], ['SY', 417], ['IQ', 418],
  ['KW', 419], ['SA', 420], ['YE', 421], ['OM', 422], ['AE', 424], ['IL', 425],
  ['PS', 425], ['BH', 426], ['QA', 427], ['MN', 428], ['NP', 429], ['IR', 432],
  ['UZ', 434], ['TJ', 436], ['KG', 437], ['TM', 438], ['JP', 440], ['KR', 450],
  ['VN', 452], ['HK', 454], ['MO', 455], ['KH', 456], ['LA', 457], ['CN', 460],
  ['TW', 466], ['KP', 467], ['BD', 470], ['MV', 472],
  // 9xx: Diego Garcia has its own assignment in the 9xx series
  ['IO', 995],

  // ---- 5xx: Oceania and South-East Asia
  ['MY', 502], ['AU', 505], ['ID', 510], ['TL', 514], ['PH', 515], ['TH', 520],
  ['SG', 525], ['BN', 528], ['NZ', 530], ['MP', 534], ['GU', 535], ['NR', 536],
  ['PG', 537], ['TO', 539], ['SB', 540], ['VU', 541], ['FJ', 542], ['WF', 543],
  ['AS', 544], ['KI', 545], ['NC', 546], ['PF', 547], ['CK', 548], ['WS', 549],
  ['FM', 550], ['MH', 551], ['PW', 552], ['TV', 553], ['TK', 554], ['NU', 555],
  // served under a parent's MCC (Australian external territories)
  ['CC', 505], ['CX', 505], ['NF', 505],

  // ---- 6xx: Africa
  ['EG', 602], ['DZ', 603], ['MA', 604], ['TN', 605], ['LY', 606], ['GM', 607],
  ['SN', 608], ['MR', 609], ['ML', 610], ['GN', 611], ['CI', 612], ['BF', 613],
  ['NE', 614], ['TG', 615], ['BJ', 616], ['MU', 617], ['LR', 618], ['SL', 619],
  ['GH', 620], ['NG', 621], ['TD', 622], ['CF', 623], ['CM', 624], ['CV', 625],
  ['ST', 626], ['GQ', 627], ['GA', 628], ['CG', 629], ['CD', 630], ['AO', 631],
  ['GW', 632], ['SC', 633], ['SD', 634], ['RW', 635], ['ET', 636], ['SO', 637],
  ['DJ', 638], ['KE', 639], ['TZ', 640], ['UG', 641], ['BI', 642], ['MZ', 643],
  ['ZM', 645], ['MG', 646], ['RE', 647], ['ZW', 648], ['NA', 649], ['MW', 650],
  ['LS', 651], ['BW', 652], ['SZ', 653], ['KM', 654], ['ZA', 655], ['ER', 657],
  ['SH', 658], ['SS', 659],
  // served under a parent's MCC
  ['YT', 647], ['AC', 658], ['TA', 658], ['EH', 604],

  // ---- 7xx: Central and South America
  ['BZ', 702], ['GT', 704], ['SV', 706], ['HN', 708], ['NI', 710], ['CR', 712],
  ['PA', 714], ['PE', 716], ['AR', 722], ['BR', 724], ['CL', 730], ['CO', 732],
  ['VE', 734], ['BO', 736], ['GY', 738], ['EC', 740], ['GF', 742], ['PY', 744],
  ['SR', 746], ['UY', 748], ['FK', 750],
];

/** ISO alpha-2 (upper case) → lowest MCC. */
export const MCC_BY_COUNTRY: ReadonlyMap<string, number> = new Map(TABLE);

/** Lowest E.212 MCC of a country (ISO alpha-2, any case), or 0 when unknown. */
export function mccOfCountry(iso2: string): number {
  if (typeof iso2 !== 'string' || iso2.length !== 2) return 0;
  return MCC_BY_COUNTRY.get(iso2) ?? MCC_BY_COUNTRY.get(iso2.toUpperCase()) ?? 0;
}

/** MCC of the destination of E.164 digits (via `countryOfE164`), or 0 when unknown. */
export function mccOfE164(digits: string): number {
  const country = countryOfE164(digits);
  return country === null ? 0 : mccOfCountry(country);
}
