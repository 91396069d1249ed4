import { formatProviderScope, type ProviderLimit, providerScope, type ProviderScope } from "@connector-store/core"
import { Clock, Effect, Option } from "effect"
import { CliError, type DatabaseOptions, withStore, withStoreReadOnly } from "../store.js"
import { printable, renderTable } from "../table.js"
import { isoTime, parseTime, relativeTime } from "../time.js"
import { output, quietly } from "../views.js"

/** A limit as the CLI's JSON shows it: times as ISO strings. */
export const limitJson = (row: ProviderLimit) => ({
  ...row,
  pausedUntil: row.pausedUntil === null ? null : isoTime(row.pausedUntil),
  updatedAt: isoTime(row.updatedAt)
})

/** The table of every limit; a pause that has ended shows as none. */
export const limitsTable = (rows: ReadonlyArray<ProviderLimit>, now: number): string =>
  renderTable(
    ["CONNECTOR", "ACCOUNT", "MAX IN FLIGHT", "PAUSED UNTIL", "STATUS", "VERSION"],
    rows.map((row) => [
      row.scope.connectorName,
      row.scope.accountKey ?? "(all accounts)",
      row.maxInFlight === null ? "-" : String(row.maxInFlight),
      row.pausedUntil === null || row.pausedUntil <= now ? "-" : relativeTime(row.pausedUntil, now),
      row.pauseStatus === null ? "-" : String(row.pauseStatus),
      String(row.version)
    ])
  )

interface ScopeOptions {
  readonly connector: string
  readonly account: Option.Option<string>
}

const scopeOf = (options: ScopeOptions): ProviderScope => providerScope(options.connector, Option.getOrUndefined(options.account))

/** A limit's one-line summary. */
const summary = (row: ProviderLimit, now: number): string => {
  const cap = row.maxInFlight === null ? "no cap" : `at most ${row.maxInFlight} in flight`
  const pause = row.pausedUntil === null || row.pausedUntil <= now ? "not paused" : `paused until ${isoTime(row.pausedUntil)} (${relativeTime(row.pausedUntil, now)})`
  return `${printable(formatProviderScope(row.scope))}: ${cap}, ${pause}`
}

/** `limits list`: every scope's pause and cap. */
export const list = (options: DatabaseOptions & { readonly json: boolean }) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const rows = yield* withStoreReadOnly(options, (store) => quietly(store.listProviderLimits()))
    yield* output(
      options.json,
      () => ({ limits: rows.map(limitJson) }),
      () => rows.length === 0 ? "no provider limits are set" : limitsTable(rows, now)
    )
  })

/** `limits set`: caps a scope's live leases (`none` clears the cap). */
export const set = (options: DatabaseOptions & ScopeOptions & { readonly json: boolean; readonly maxInFlight: string }) =>
  Effect.gen(function*() {
    const text = options.maxInFlight.trim()
    const maxInFlight = text === "none" ? null : /^\d+$/.test(text) ? Number(text) : undefined
    if (maxInFlight === undefined) {
      return yield* Effect.fail(new CliError({ message: `--max-in-flight must be a whole number or "none"; got ${JSON.stringify(options.maxInFlight)}` }))
    }
    const now = yield* Clock.currentTimeMillis
    const row = yield* withStore(options, (store) => store.setProviderLimit({ ...scopeOf(options), maxInFlight }))
    yield* output(options.json, () => limitJson(row), () => `set ${summary(row, now)}`)
  })

/** `limits pause`: no operation of the scope is leased before `--until`. */
export const pause = (options: DatabaseOptions & ScopeOptions & { readonly json: boolean; readonly until: string }) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const until = parseTime(options.until, now, 1)
    if (until === undefined || until <= now) {
      return yield* Effect.fail(new CliError({ message: `--until must be a duration like 10m or 2h, or an ISO time in the future; got ${JSON.stringify(options.until)}` }))
    }
    const row = yield* withStore(options, (store) => store.pauseProvider({ ...scopeOf(options), until }))
    yield* output(options.json, () => limitJson(row), () => summary(row, now))
  })

/** `limits resume`: lifts the scope's pause at once; its cap stays. */
export const resume = (options: DatabaseOptions & ScopeOptions & { readonly json: boolean }) =>
  Effect.gen(function*() {
    const now = yield* Clock.currentTimeMillis
    const scope = scopeOf(options)
    const row = yield* withStore(options, (store) => store.resumeProvider(scope))
    yield* output(
      options.json,
      () => ({ limit: Option.match(row, { onNone: () => null, onSome: limitJson }) }),
      () => Option.match(row, { onNone: () => `${printable(formatProviderScope(scope))} has no limits; nothing changed`, onSome: (r) => `resumed ${summary(r, now)}` })
    )
  })
