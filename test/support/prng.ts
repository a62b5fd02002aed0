/**
 * mulberry32: a small seeded PRNG, so that a generated test case that fails can be reproduced. The
 * fault suite's plan uses the same generator (scripts/faults/plan.ts): one definition.
 */
export { seededRandom as seededRng } from '../../scripts/faults/plan.js';
