import { Clock, Console, Effect, Option } from "effect"
import { type DatabaseOptions, withStore, withStoreReadOnly } from "../store.js"
import { printable } from "../table.js"
import { candidatesTable, output, pageText, quietly, runJson, runsTable } from "../views.js"
import { checkedLimit, nextPageHint, type PageOptions } from "./lists.js"

/** A relist scope as its flags give it. */
interface ScopeOptions {
  readonly owner: string
  readonly connector: string
  readonly model: string
  readonly account: string
}

const scopeOf = (options: ScopeOptions) => ({
  ownerDID: options.owner,
  connectorName: options.connector,
  model: options.model,
  accountKey: options.account
})

/** `relist list`: relist runs, newest first. */
export const list = (options: PageOptions & {
  readonly state: ReadonlyArray<"started" | "listing" | "complete" | "abandoned" | "superseded">
}) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const now = yield* Clock.currentTimeMillis
    const page = yield* withStoreReadOnly(options, (store) =>
      quietly(store.listRelistRuns({
        states: options.state.length === 0 ? undefined : options.state,
        limit,
        cursor: Option.getOrUndefined(options.cursor)
      })))
    yield* output(
      options.json,
      () => ({ runs: page.items.map(runJson), nextCursor: page.nextCursor, corrupt: page.corrupt }),
      () => pageText(page.items, page.corrupt, "no relist runs match", (items) => runsTable(items, now))
    )
    if (!options.json) yield* nextPageHint(page.nextCursor)
  })

/** `relist abandon`: ends a current run on purpose; it yields no candidates. */
export const abandon = (options: DatabaseOptions & { readonly json: boolean; readonly run: string }) =>
  Effect.gen(function*() {
    const outcome = yield* withStore(options, (store) => store.abandonRelistRun(options.run))
    yield* output(
      options.json,
      () => ({ runID: options.run, outcome }),
      () =>
        outcome === "abandoned"
          ? `abandoned relist run ${printable(options.run)}: it takes no more pages and yields no candidates`
          : `relist run ${printable(options.run)} had already ended; nothing changed`
    )
  })

/** `relist given-up`: a scope's sweep candidates that failed too often to apply and wait for a person. */
export const givenUp = (options: DatabaseOptions & ScopeOptions & {
  readonly json: boolean
  readonly limit: number
  readonly after: Option.Option<string>
}) =>
  Effect.gen(function*() {
    const limit = yield* checkedLimit(options.limit)
    const rows = yield* withStoreReadOnly(options, (store) =>
      store.listGivenUpSweepCandidates(scopeOf(options), { limit, after: Option.getOrUndefined(options.after) }))
    const last = rows[rows.length - 1]
    yield* output(
      options.json,
      () => ({ candidates: rows.map((row) => ({ ...row, createdAt: new Date(row.createdAt).toISOString(), updatedAt: new Date(row.updatedAt).toISOString() })) }),
      () => rows.length === 0 ? "no given-up candidates" : candidatesTable(rows)
    )
    if (!options.json && rows.length === limit && last !== undefined) yield* Console.log(`\nnext page: --after ${printable(last.sourceID)}`)
  })

/** `relist rearm-candidate`: opens a given-up candidate again for the sweep. */
export const rearmCandidate = (options: DatabaseOptions & ScopeOptions & { readonly json: boolean; readonly source: string }) =>
  Effect.gen(function*() {
    const outcome = yield* withStore(options, (store) => store.rearmSweepCandidate({ ...scopeOf(options), sourceID: options.source }))
    yield* output(
      options.json,
      () => ({ sourceID: options.source, outcome }),
      () =>
        outcome === "rearmed"
          ? `re-armed sweep candidate ${printable(options.source)}: open again, apply attempts reset`
          : `sweep candidate ${printable(options.source)} is not given up; nothing changed`
    )
  })
