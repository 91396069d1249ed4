import type fc from "fast-check"

/** Thrown inside an actor when its crash plan names the point it reached: the actor stops there for good. */
export class Crash extends Error {
  constructor(readonly actor: string, readonly at: string) {
    super(`${actor} crashed at ${at}`)
  }
}

/** One line of a run's trace: a call and its answer, a crash, or a note. */
export interface TraceLine {
  readonly actor: string
  readonly what: string
  readonly answer: string
}

/**
 * A controlled schedule over fast-check's `fc.scheduler()`: every awaited
 * step of every actor (a store call, a winner read, a provider request, its
 * arrival, its answer, a timeout) is a task the scheduler releases in an
 * order drawn from the run's seed, so any interleaving of the actors can
 * happen and every one replays from the seed and path fast-check prints.
 * Each actor's own points are counted; its crash plan (the point number it
 * dies at, if any) turns that point into a crash: the actor stops there,
 * holding whatever lease it held, which lapses when the clock passes it.
 *
 * Once `calm` is set (the recovery after the schedule), points resolve at
 * once, in program order, and nothing crashes.
 */
export class Interleaving {
  readonly trace: Array<TraceLine> = []
  calm = false
  private readonly counts = new Map<string, number>()

  constructor(
    private readonly s: fc.Scheduler,
    /** Per actor, the number of the point (1-based, counting its own points) at which it crashes. */
    private readonly crashAt: ReadonlyMap<string, number> = new Map()
  ) {}

  /**
   * A point of `actor`: resolves when the schedule releases it, or throws
   * `Crash` when the actor's crash plan names it.
   */
  async point(actor: string, label: string): Promise<void> {
    if (this.calm) return
    await this.s.schedule(Promise.resolve(), `${actor}: ${label}`)
    const n = (this.counts.get(actor) ?? 0) + 1
    this.counts.set(actor, n)
    if (this.crashAt.get(actor) === n) {
      this.trace.push({ actor, what: label, answer: "CRASH" })
      throw new Crash(actor, label)
    }
  }

  /** A point no actor owns (a provider event, a winner read): never a crash. */
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

  /** Adds an answer to the trace without a point (a provider answer, a read). */
  record(actor: string, what: string, answer: string): void {
    this.trace.push({ actor, what, answer })
  }

  /** Adds a note (a ground-truth event) to the trace. */
  note(text: string): void {
    this.trace.push({ actor: "·", what: text, answer: "" })
  }

  /** Releases scheduled tasks until `task` settles (everything the actors wait on is scheduled here). */
  waitFor<A>(task: Promise<A>): Promise<A> {
    return this.s.waitFor(task)
  }

  /** Releases every scheduled task, and those they schedule, until none is left. */
  async drain(): Promise<void> {
    for (let i = 0; i < 10_000 && this.s.count() > 0; i++) await this.s.waitIdle()
  }

  /** The trace as numbered lines. */
  formatTrace(): string {
    return this.trace.map((t, i) => `${String(i + 1).padStart(4)}  ${t.actor.padEnd(12)} ${t.what}${t.answer === "" ? "" : ` → ${t.answer}`}`).join("\n")
  }
}

/** A short rendering of a store answer for the trace. */
export const brief = (value: unknown): string => {
  if (value === null || value === undefined) return String(value)
  if (typeof value !== "object") return String(value)
  const v = value as Record<string, unknown>
  if (typeof v.outcome === "string") {
    const extra = v.reissue !== undefined ? ` reissue ${(v.reissue as { kind?: string } | null)?.kind ?? "none"}` : ""
    const op = v.operation as { state?: string } | null | undefined
    return `${v.outcome}${extra}${op?.state !== undefined ? ` (${op.state})` : ""}`
  }
  if (Array.isArray(value)) return `${value.length} items`
  if (typeof v.state === "string") return `state ${v.state}`
  if (typeof v.verificationStatus === "string") return `watch ${v.verificationStatus} g${String(v.repairGeneration)}`
  return JSON.stringify(value).slice(0, 120)
}

/** `_tag: message` of a store error, or the error as text. */
export const describeError = (error: unknown): string => {
  const e = error as { _tag?: unknown; message?: unknown }
  return typeof e?._tag === "string" ? `${e._tag}: ${String(e.message ?? "").slice(0, 160)}` : `untyped ${String(error).slice(0, 160)}`
}
