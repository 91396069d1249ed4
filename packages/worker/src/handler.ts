/** The handlers a worker calls. */
export type HandlerName = "send" | "classify" | "lookup" | "verify" | "repair"

/**
 * How a handler misbehaved, as the worker records it:
 *
 * - `threw-non-error`: it threw (or rejected with) something that is not an `Error`; treated as that failure all the same.
 * - `garbage`: it answered something that is not what it promises (a `send` without an entity id, a digest that is no string).
 * - `timed-out`: it did not answer within its time (`sendTimeoutMs`, `handlerTimeoutMs`); its signal was aborted.
 * - `ignored-abort`: it did not settle within `abortGraceMs` of its abort; the worker went on without it.
 * - `answered-after-abort`: it answered once its call was given up; the answer was dropped.
 * - `no-connector`: the worker has no connector of the operation's or watch's name; it was deferred untouched.
 */
export type HandlerFaultKind = "threw-non-error" | "garbage" | "timed-out" | "ignored-abort" | "answered-after-abort" | "no-connector"

/** A handler's misbehaviour, with what it touched: the worker changed nothing on its account beyond what the fault says. */
export class HandlerFault extends Error {
  override readonly name = "HandlerFault"
  constructor(
    readonly fault: HandlerFaultKind,
    readonly handler: HandlerName,
    readonly connectorName: string,
    /** `callerDID/operationID` of the operation, or the watched entity's source id. */
    readonly subject: string,
    readonly detail: string
  ) {
    super(`${connectorName}.${handler} (${subject}): ${fault}: ${detail}`)
  }
}

/** How a handler call ended. */
export type HandlerOutcome<A> =
  | { readonly kind: "answered"; readonly value: A }
  | { readonly kind: "threw"; readonly error: unknown }
  | { readonly kind: "timed-out" }
  | { readonly kind: "aborted" }

/** A short, safe description of any value, for a fault's detail. */
export const describeValue = (value: unknown): string => {
  try {
    if (typeof value === "string") return JSON.stringify(value.slice(0, 200))
    if (typeof value === "function") return "a function"
    if (typeof value === "symbol") return value.toString()
    if (typeof value === "bigint") return `${value}n`
    const text = JSON.stringify(value)
    return text === undefined ? String(value) : text.slice(0, 200)
  } catch {
    return Object.prototype.toString.call(value)
  }
}

/**
 * Runs a handler under `signal` (an abort from outside) and `timeoutMs`: its answer, its failure, its timeout, or the abort.
 * Once given up (timed out or aborted) it waits at most `abortGraceMs` for the handler to settle and reports `onLate` if it
 * never does or answers anyway; what the handler does then changes nothing.
 */
export const runHandler = async <A>(
  call: (signal: AbortSignal) => Promise<A>,
  options: {
    readonly signal: AbortSignal
    readonly timeoutMs: number
    readonly abortGraceMs: number
    readonly onLate: (fault: "ignored-abort" | "answered-after-abort", detail: string) => void
  }
): Promise<HandlerOutcome<A>> => {
  const controller = new AbortController()
  const abortOwn = () => controller.abort(options.signal.reason)
  if (options.signal.aborted) abortOwn()
  else options.signal.addEventListener("abort", abortOwn, { once: true })
  const running: Promise<HandlerOutcome<A>> = (async () => {
    try {
      return { kind: "answered", value: await call(controller.signal) } as const
    } catch (error) {
      return { kind: "threw", error } as const
    }
  })()
  let timer: ReturnType<typeof setTimeout> | undefined
  let onAbort: (() => void) | undefined
  const givenUp = new Promise<"timed-out" | "aborted">((resolve) => {
    timer = setTimeout(() => resolve("timed-out"), options.timeoutMs)
    onAbort = () => resolve("aborted")
    if (controller.signal.aborted) resolve("aborted")
    else controller.signal.addEventListener("abort", onAbort, { once: true })
  })
  try {
    const first = await Promise.race([running, givenUp])
    if (typeof first === "object") return first
    if (first === "timed-out") controller.abort(new Error("the handler timed out"))
    // Given up: the handler has abortGraceMs to settle; whatever it answers is dropped.
    let graceTimer: ReturnType<typeof setTimeout> | undefined
    const grace = new Promise<"grace-over">((resolve) => { graceTimer = setTimeout(() => resolve("grace-over"), options.abortGraceMs) })
    const after = await Promise.race([running, grace])
    clearTimeout(graceTimer)
    if (after === "grace-over") {
      options.onLate("ignored-abort", `did not settle within ${options.abortGraceMs} ms of its abort`)
      void running.then((late) => {
        if (late.kind === "answered") options.onLate("answered-after-abort", `answered ${describeValue(late.value)} after it was given up`)
      })
    } else if (after.kind === "answered") {
      options.onLate("answered-after-abort", `answered ${describeValue(after.value)} after it was given up`)
    }
    return { kind: first }
  } finally {
    clearTimeout(timer)
    if (onAbort !== undefined) controller.signal.removeEventListener("abort", onAbort)
    options.signal.removeEventListener("abort", abortOwn)
  }
}
