// The measurement: warm both sides up, then alternate timed rounds of the
// project and the raw reference (project first on even rounds, raw first on
// odd ones), so drift (page cache, autovacuum, thermal) hits both alike.
import { performance } from "node:perf_hooks"

const positiveInt = (value, fallback, name) => {
  if (value === undefined || value === "") return fallback
  const n = Number(value)
  if (!Number.isSafeInteger(n) || n <= 0) throw new TypeError(`${name} must be a positive integer, got ${JSON.stringify(value)}`)
  return n
}

/** Rounds, round length and warm-up from `BENCH_ROUNDS`, `BENCH_ROUND_MS`, `BENCH_WARMUP_MS`. */
export const measurementSettings = (env) => ({
  rounds: positiveInt(env.BENCH_ROUNDS, 4, "BENCH_ROUNDS"),
  roundMs: positiveInt(env.BENCH_ROUND_MS, 750, "BENCH_ROUND_MS"),
  warmupMs: positiveInt(env.BENCH_WARMUP_MS, 400, "BENCH_WARMUP_MS")
})

/**
 * Runs `cycle(worker)` in `workers` concurrent loops until `ms` have passed;
 * a cycle started before the deadline is finished and counted.
 */
const runFor = async (cycle, workers, ms) => {
  let cycles = 0
  const cpu = process.cpuUsage()
  const start = performance.now()
  const deadline = start + ms
  const loop = async (worker) => {
    while (performance.now() < deadline) {
      await cycle(worker)
      cycles++
    }
  }
  await Promise.all(Array.from({ length: workers }, (_, worker) => loop(worker)))
  const used = process.cpuUsage(cpu)
  return { cycles, seconds: (performance.now() - start) / 1000, cpuMicros: used.user + used.system }
}

const WARM_CYCLES = 200

/**
 * Runs `cycle` for `warmupMs` and at least `WARM_CYCLES` cycles (so a slow
 * side's code is compiled hot too), but no longer than three times `warmupMs`.
 */
const warmUp = async (cycle, workers, warmupMs) => {
  let cycles = 0
  const start = performance.now()
  while (performance.now() - start < 3 * warmupMs) {
    cycles += (await runFor(cycle, workers, Math.min(warmupMs, 100))).cycles
    if (cycles >= WARM_CYCLES && performance.now() - start >= warmupMs) return
  }
}

const summarize = (samples) => {
  const cycles = samples.reduce((sum, s) => sum + s.cycles, 0)
  const seconds = samples.reduce((sum, s) => sum + s.seconds, 0)
  const rates = samples.map((s) => s.cycles / s.seconds)
  // This process's CPU (user + system) per cycle: the client's cost, apart from waiting on the database.
  const cpuPerCycle = samples.reduce((sum, s) => sum + s.cpuMicros, 0) / cycles
  return { cycles, seconds, rate: cycles / seconds, minRate: Math.min(...rates), maxRate: Math.max(...rates), cpuPerCycle }
}

/**
 * Measures an opened case (`{ project, raw, baselines? }`, each one cycle per
 * call). Every round runs each side once, in an order rotated round by round
 * (with two sides: project first on even rounds, raw first on odd ones).
 * Returns each side's overall rate (all cycles over all measured time) with
 * its per-round range, and project / raw with its per-round range;
 * `baselines` lists each extra side with its rate and its ratio to raw.
 */
export const measureCase = async (opened, { workers, rounds, roundMs, warmupMs }) => {
  const sides = [["project", opened.project], ["raw", opened.raw], ...Object.entries(opened.baselines ?? {})]
  for (const [name, cycle] of sides) {
    if (typeof cycle !== "function") throw new TypeError(`open() must return a ${name}(worker) cycle function`)
    await warmUp(cycle, workers, warmupMs)
  }
  const samples = new Map(sides.map(([name]) => [name, []]))
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < sides.length; i++) {
      const [name, cycle] = sides[(round + i) % sides.length]
      samples.get(name).push(await runFor(cycle, workers, roundMs))
    }
  }
  const rateOf = (sample) => sample.cycles / sample.seconds
  const ratiosTo = (name) => samples.get(name).map((s, i) => rateOf(s) / rateOf(samples.get("raw")[i]))
  const raw = summarize(samples.get("raw"))
  const summary = (name) => {
    const side = summarize(samples.get(name))
    const ratios = ratiosTo(name)
    return { ...side, ratio: side.rate / raw.rate, minRatio: Math.min(...ratios), maxRatio: Math.max(...ratios) }
  }
  const { ratio, minRatio, maxRatio, ...project } = summary("project")
  return {
    project,
    raw,
    ratio,
    minRatio,
    maxRatio,
    baselines: Object.keys(opened.baselines ?? {}).map((name) => ({ name, ...summary(name) }))
  }
}
