import type fc from "fast-check"

/** Thrown inside a runner when its crash plan names the point it reached: the runner stops there for good. */
export class Crash extends Error {
  /** Always `"Crash"`: a simulated process death, never a store error. */
  override readonly name = "Crash"
  constructor(
    /** The runner that died. */
    readonly actor: string,
    /** The point it died at. */
    readonly at: string
  ) {
    super(`${actor} crashed at ${at}`)
  }
}

/** One line of a run's trace: a call and its answer, a crash, or a note. */
export interface TraceLine {
  /** Who made the call (`·` for a note). */
  readonly actor: string
  /** The call, with the arguments that tell it apart. */
  readonly what: string
  /** Its answer, a rejection, `CRASH`, or empty for a note. */
  readonly answer: string
}

/**
 * Where the awaited steps of a run wait: every step of every runner, and
 * every event of the provider, is released when the pacer says so. The
 * testkit's pacers are `Interleaving` (fast-check's scheduler decides) and
 * `immediatePacer` (every step at once, in program order).
 */
export interface Pacer {
  /** A point of `actor`: resolves when released, or throws `Crash` when its crash plan names it. */
  point(actor: string, label: string): Promise<void>
  /** A point no runner owns (a request's arrival, an answer travelling back): never a crash. */
  provider(label: string): Promise<void>
  /** True while points resolve at once and nothing crashes (no timeouts, every fate `ok`). */
  readonly calm: boolean
  /** False when a sender stops waiting only for a request that will not be answered; by default it may give up on any. */
  readonly racesTimeouts?: boolean | undefined
  /** Adds an answer to the trace without a point. */
  record(actor: string, what: string, answer: string): void
  /** Adds a note (a ground-truth event) to the trace. */
  note(text: string): void
}

/** A pacer that releases every step at once and crashes nothing; its trace is kept. */
export const immediatePacer = (): Pacer & { readonly trace: Array<TraceLine> } => {
  const trace: Array<TraceLine> = []
  return {
    trace,
    calm: false,
    racesTimeouts: false,
    point: async () => {},
    provider: async () => {},
    record: (actor, what, answer) => void trace.push({ actor, what, answer }),
    note: (text) => void trace.push({ actor: "·", what: text, answer: "" })
  }
}

/**
 * A controlled schedule over fast-check's `fc.scheduler()`: every awaited
 * step of every runner (a store call, a provider request, its arrival, its
 * answer, a timeout) is a task the scheduler releases in an order drawn
 * from the run's seed, so any interleaving can happen and every one replays
 * from the seed and path fast-check prints. Each runner's own points are
 * counted; its crash plan (the point number it dies at, if any) turns that
 * point into a crash: the runner stops there, holding whatever lease it
 * held, and every later point of it throws too.
 *
 * Once `calm` is set (the recovery after the schedule), points resolve at
 * once, in program order, and nothing crashes.
 */
export class Interleaving implements Pacer {
  /** Every call and answer of the run, in order. */
  readonly trace: Array<TraceLine> = []
  /** See `Pacer.calm`. */
  calm = false
  private readonly counts = new Map<string, number>()
  private readonly dead = new Set<string>()

  constructor(
    private readonly s: fc.Scheduler,
    /** Per runner, the number of the point (1-based, counting its own points) at which it crashes. */
    private readonly crashAt: ReadonlyMap<string, number> = new Map()
  ) {}

  /** See `Pacer.point`. */
  async point(actor: string, label: string): Promise<void> {
    if (this.dead.has(actor)) throw new Crash(actor, label)
    if (this.calm) return
    await this.s.schedule(Promise.resolve(), `${actor}: ${label}`)
    const n = (this.counts.get(actor) ?? 0) + 1
    this.counts.set(actor, n)
    if (this.crashAt.get(actor) === n) {
      this.dead.add(actor)
      this.trace.push({ actor, what: label, answer: "CRASH" })
      throw new Crash(actor, label)
    }
  }

  /** True once `actor` crashed. */
  crashed(actor: string): boolean {
    return this.dead.has(actor)
  }

  /** See `Pacer.provider`. */
  async provider(label: string): Promise<void> {
    if (this.calm) return
    await this.s.schedule(Promise.resolve(), label)
  }

  /**
   * A store call of `actor`: a point before it is issued (a crash there
   * means it never was), the call itself, and a point after its answer (a
   * crash there means it landed but its answer was lost). The call and its
   * answer (or rejection) go in the trace.
   */
  async call<A>(actor: string, what: string, run: () => Promise<A>, show: (a: A) => string = brief): Promise<A> {
    await this.point(actor, what)
    let value: A
    try {
      value = await run()
    } catch (error) {
      this.trace.push({ actor, what, answer: `rejected ${describeError(error)}` })
      throw error
    }
    this.trace.push({ actor, what, answer: show(value) })
    await this.point(actor, `${what} answered`)
    return value
  }

  /** See `Pacer.record`. */
  record(actor: string, what: string, answer: string): void {
    this.trace.push({ actor, what, answer })
  }

  /** See `Pacer.note`. */
  note(text: string): void {
    this.trace.push({ actor: "·", what: text, answer: "" })
  }

  /** Releases scheduled tasks until `task` settles. */
  waitFor<A>(task: Promise<A>): Promise<A> {
    return this.s.waitFor(task)
  }

  /** Releases every scheduled task, and those they schedule, until none is left. */
  async drain(): Promise<void> {
    for (let i = 0; i < 10_000 && this.s.count() > 0; i++) await this.s.waitIdle()
  }

  /** The trace as numbered lines. */
  formatTrace(): string {
    return formatTrace(this.trace)
  }
}

/** A trace as numbered lines, one call and its answer a line. */
export const formatTrace = (trace: ReadonlyArray<TraceLine>): string =>
  trace.map((t, i) => `${String(i + 1).padStart(4)}  ${t.actor.padEnd(10)} ${t.what}${t.answer === "" ? "" : ` → ${t.answer}`}`).join("\n")

/** A short rendering of a store answer for the trace. */
export const brief = (value: unknown): string => {
  if (value === null || value === undefined) return String(value)
  if (typeof value !== "object") return String(value)
  const v = value as Record<string, unknown>
  if (typeof v.outcome === "string") {
    const reissue = v.reissue as { kind?: string; ifMatch?: string; providerID?: string } | null | undefined
    const extra = reissue === undefined ? "" : ` reissue ${reissue === null ? "none" : `${reissue.kind}${reissue.ifMatch === undefined ? "" : ` ifMatch ${reissue.ifMatch}`}${reissue.providerID === undefined ? "" : ` id ${reissue.providerID}`}`}`
    const op = v.operation as { state?: string } | null | undefined
    return `${v.outcome}${extra}${op?.state !== undefined ? ` (${op.state})` : ""}`
  }
  if (Array.isArray(value)) return `${value.length} items`
  if (Array.isArray(v.operations) && Array.isArray(v.watches)) return `${v.operations.length} operations, ${v.watches.length} watches due`
  if (typeof v.state === "string") return `state ${v.state}`
  if (typeof v.verificationStatus === "string") return `watch ${v.verificationStatus} g${String(v.repairGeneration)}`
  return JSON.stringify(value).slice(0, 120)
}

/** `_tag: message` of a store error, or the error as text marked untyped. */
export const describeError = (error: unknown): string => {
  const e = error as { _tag?: unknown; message?: unknown }
  return typeof e?._tag === "string" ? `${e._tag}: ${String(e.message ?? "").slice(0, 160)}` : `untyped ${String(error).slice(0, 160)}`
}
