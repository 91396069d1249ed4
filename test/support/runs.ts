/**
 * How many runs each fast-check property makes. `CONNECTOR_STORE_MODEL_RUNS`
 * (CI sets 200; 200 when unset) scales every property's own default: at 200
 * each runs its default, at 2000 ten times as many, at 20 a tenth (one run
 * at least).
 */
const BASE_RUNS = 200

const configured = (): number => {
  const raw = process.env["CONNECTOR_STORE_MODEL_RUNS"]
  if (raw === undefined) return BASE_RUNS
  const runs = Number(raw)
  if (!Number.isSafeInteger(runs) || runs <= 0) {
    throw new Error(`CONNECTOR_STORE_MODEL_RUNS must be a positive whole number of runs, got ${JSON.stringify(raw)}`)
  }
  return runs
}

/** The configured runs of a model property (`CONNECTOR_STORE_MODEL_RUNS`, 200 by default). */
export const MODEL_RUNS = configured()

/**
 * The runs of a property whose default is `defaultRuns`, scaled by
 * `CONNECTOR_STORE_MODEL_RUNS`; never below `min` (a seeded check that
 * needs that many runs to reach the case it replays).
 */
export const propertyRuns = (defaultRuns: number, { min = 1 }: { readonly min?: number } = {}): number =>
  Math.max(min, Math.round(defaultRuns * MODEL_RUNS / BASE_RUNS))
