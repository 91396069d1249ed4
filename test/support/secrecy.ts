import { inspect } from "node:util"
import { Cause, Effect, Exit, Logger, LogLevel, Option, Tracer } from "effect"
import { expect } from "vitest"

/** Every way a value is commonly turned into text: String, JSON, util.inspect, and an error's message and stack. */
export const renderings = (value: unknown): ReadonlyArray<string> => {
  const seen = new WeakSet<object>()
  const json = JSON.stringify(value, (_key, v: unknown) => {
    if (typeof v === "bigint") return `${v}n`
    if (typeof v === "object" && v !== null) {
      if (seen.has(v)) return "[cycle]"
      seen.add(v)
    }
    return v
  })
  const out = [String(value), json ?? "", inspect(value, { depth: 12, showHidden: true, getters: true })]
  if (value instanceof Error) out.push(value.message, value.stack ?? "")
  if (Cause.isCause(value)) out.push(Cause.pretty(value))
  return out
}

/** Asserts that no rendering of `value` contains `secret`. */
export const revealsNothing = (value: unknown, secret: string): void => {
  for (const text of renderings(value)) expect(text).not.toContain(secret)
}

/** A span as a test tracer recorded it. */
export interface RecordedSpan {
  readonly name: string
  readonly attributes: Map<string, unknown>
  readonly events: Array<readonly [string, Record<string, unknown> | undefined]>
  exit: Exit.Exit<unknown, unknown> | undefined
}

/** A tracer that records every span it starts into `spans` (as a tracing backend would receive them). */
export const recordingTracer = (spans: Array<RecordedSpan>): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const recorded: RecordedSpan = { name, attributes: new Map(), events: [], exit: undefined }
      spans.push(recorded)
      let status: Tracer.SpanStatus = { _tag: "Started", startTime }
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: `span-${spans.length}`,
        traceId: Option.match(parent, { onNone: () => "trace", onSome: (p) => p.traceId }),
        parent,
        context,
        get status() {
          return status
        },
        attributes: recorded.attributes,
        links: Array.from(links),
        sampled: true,
        kind,
        end: (endTime, exit) => {
          status = { _tag: "Ended", startTime, endTime, exit }
          recorded.exit = exit
        },
        attribute: (key, value) => void recorded.attributes.set(key, value),
        event: (eventName, _time, attributes) => void recorded.events.push([eventName, attributes]),
        addLinks: () => undefined
      }
      return span
    },
    context: (f) => f()
  })

/** What `watchingLogsAndSpans` saw. */
export interface Watched<A, E> {
  readonly exit: Exit.Exit<A, E>
  /** Every log line, formatted with its annotations and cause, at every level. */
  readonly lines: ReadonlyArray<string>
  readonly spans: ReadonlyArray<RecordedSpan>
}

/**
 * Runs `effect` inside a span named `test.watched`, with every log line (at
 * every level) and every span recorded, as a logging and tracing backend
 * would receive them; a failure is kept in `exit`, not raised.
 */
export const watchingLogsAndSpans = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<Watched<A, E>, never, R> => {
  const lines: Array<string> = []
  const spans: Array<RecordedSpan> = []
  const logger = Logger.make(({ annotations, cause, logLevel, message }) => {
    lines.push(renderings({ logLevel: logLevel.label, message, annotations: Object.fromEntries(annotations) }).join("\n"))
    if (!Cause.isEmpty(cause)) lines.push(Cause.pretty(cause))
  })
  return effect.pipe(
    Effect.withSpan("test.watched"),
    Effect.withTracer(recordingTracer(spans)),
    Logger.withMinimumLogLevel(LogLevel.All),
    Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
    Effect.exit,
    Effect.map((exit) => ({ exit, lines, spans }))
  )
}
