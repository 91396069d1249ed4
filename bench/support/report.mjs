// How results are printed: one header per bench file, one line per case.
const rate = (n) => Math.round(n).toLocaleString("en-US").padStart(9)
const times = (n) => `${n.toFixed(2)}×`

/** The header of a bench file's table. */
export const formatHeader = (file, title, { rounds, roundMs, warmupMs }) =>
  [
    "",
    `${file}: ${title}`,
    `  (warm-up ≥${warmupMs} ms and ≥200 cycles per side, then ${rounds} alternating rounds of ${roundMs} ms per side)`,
    `  ${"case".padEnd(46)} ${"project/s".padStart(9)} ${"raw/s".padStart(9)}  ratio  (per round)     aim`
  ].join("\n")

const range = (min, max) => `(${times(min)}–${times(max)})`.padEnd(15)

const micros = (n) => `${Math.round(n).toLocaleString("en-US")} µs`

/**
 * One measured case; `aim` (a ratio) is compared when the case declares one.
 * A case with `cpu: true` gets a line with this process's CPU per cycle on
 * each side, baselines included (on a server database, the client's cost
 * apart from waiting).
 * Each baseline gets a line of its own under the case, its rate in the
 * project column and its ratio to raw.
 */
export const formatCaseResult = (entry, { project, raw, ratio, minRatio, maxRatio, baselines }) => {
  const aim = entry.aim === undefined ? "" : `≥${times(entry.aim)} ${ratio >= entry.aim ? "met" : "MISSED"}`
  return [
    `  ${entry.name.padEnd(46)} ${rate(project.rate)} ${rate(raw.rate)}  ${times(ratio)}  ${range(minRatio, maxRatio)} ${aim}`,
    ...baselines.map((b) =>
      `    ↳ ${b.name.padEnd(42)} ${rate(b.rate)} ${"".padStart(9)}  ${times(b.ratio)}  ${range(b.minRatio, b.maxRatio)}`
    ),
    ...(entry.cpu === true
      ? [
        `    client CPU per cycle: project ${micros(project.cpuPerCycle)}, raw ${micros(raw.cpuPerCycle)} ` +
        `(${times(project.cpuPerCycle / raw.cpuPerCycle)} raw's)`,
        ...baselines.map((b) => `      ↳ ${b.name}: ${micros(b.cpuPerCycle)} (${times(b.cpuPerCycle / raw.cpuPerCycle)} raw's)`)
      ]
      : [])
  ].join("\n")
}

/** A case that could not run here, and why. */
export const formatSkip = (name, why) => `  ${name.padEnd(46)} SKIPPED: ${why}`
