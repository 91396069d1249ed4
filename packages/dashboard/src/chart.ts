import { html, type Html } from "./html.js"

/** One reading of the store's counts, for the chart. */
export interface Sample {
  readonly at: number
  /** Attempted operations: the backlog still to drive. */
  readonly backlog: number
  /** What waits for a person: dead, reconcile_only, repair_failed. */
  readonly stuck: number
  /** Committed operations (their growth between readings is the outcomes drawn as bars). */
  readonly committed: number
}

/** The last `size` samples, one per status reading. */
export class SampleRing {
  private readonly samples: Array<Sample> = []
  constructor(private readonly size = 120) {}
  add(sample: Sample): void {
    this.samples.push(sample)
    if (this.samples.length > this.size) this.samples.shift()
  }
  all(): ReadonlyArray<Sample> {
    return this.samples
  }
}

const W = 720
const H = 180
const PAD = 28

/** The backlog and what waits for a person as lines, commits between readings as bars, over the readings kept. */
export const chartOf = (samples: ReadonlyArray<Sample>): Html => {
  if (samples.length < 2) {
    return html`<p class="muted">The chart fills in as the page refreshes (one reading per refresh).</p>`
  }
  const first = samples[0]!.at
  const last = samples[samples.length - 1]!.at
  const span = Math.max(1, last - first)
  const commits = samples.slice(1).map((s, i) => Math.max(0, s.committed - samples[i]!.committed))
  const top = Math.max(1, ...samples.map((s) => Math.max(s.backlog, s.stuck)), ...commits)
  const x = (at: number) => PAD + ((at - first) / span) * (W - 2 * PAD)
  const y = (n: number) => H - PAD - (n / top) * (H - 2 * PAD)
  const line = (pick: (s: Sample) => number) => samples.map((s) => `${x(s.at).toFixed(1)},${y(pick(s)).toFixed(1)}`).join(" ")
  const barWidth = Math.max(2, (W - 2 * PAD) / samples.length - 2)
  return html`<svg class="chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="backlog and outcomes over time">
<line class="grid" x1="${PAD}" y1="${H - PAD}" x2="${W - PAD}" y2="${H - PAD}"/><line class="grid" x1="${PAD}" y1="${PAD}" x2="${W - PAD}" y2="${PAD}"/>
<text x="2" y="${PAD + 4}">${top}</text><text x="2" y="${H - PAD + 4}">0</text>
<text x="${PAD}" y="${H - 8}">${new Date(first).toISOString().slice(11, 19)}</text><text x="${W - PAD - 50}" y="${H - 8}">${
    new Date(last).toISOString().slice(11, 19)
  }</text>
${commits.map((n, i) => n === 0 ? null : html`<rect class="done" x="${(x(samples[i + 1]!.at) - barWidth / 2).toFixed(1)}" y="${y(n).toFixed(1)}" width="${barWidth.toFixed(1)}" height="${(H - PAD - y(n)).toFixed(1)}"/>`)}
<polyline class="backlog" points="${line((s) => s.backlog)}"/><polyline class="stuck" points="${line((s) => s.stuck)}"/></svg>
<div class="legend"><span><i class="l-backlog"></i>attempted (backlog)</span><span><i class="l-stuck"></i>waiting for a person</span><span><i class="l-done"></i>committed since the reading before</span></div>`
}
