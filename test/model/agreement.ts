import { ConnectorStore, type ProjectionWatch, type WatchIdentity } from "@connector-store/core"
import { Cause, Effect, Exit, Option } from "effect"
import { expect } from "vitest"
import type { RealStore, StoreRows } from "./RealStore.js"
import { historyOf, operationKeyOf, type WatchModel, watchKeyOf, watchOf } from "./WatchModel.js"

/** What a call came to: a value, or the tag of the error it failed with. */
export type Outcome<A> = { readonly ok: A } | { readonly fail: string }

/** The outcome of an exit, comparable with the model's expectation. */
export const outcomeOf = <A, E>(exit: Exit.Exit<A, E>): Outcome<A> => {
  if (Exit.isSuccess(exit)) return { ok: exit.value }
  const failure = Cause.failureOption(exit.cause)
  if (Option.isSome(failure)) {
    const error = failure.value as { readonly _tag?: unknown }
    return { fail: typeof error._tag === "string" ? error._tag : String(error) }
  }
  return { fail: `defect: ${Cause.pretty(exit.cause)}` }
}

/** The message every disagreement carries: the adapter, the command and every command before it. */
export const context = (m: WatchModel, what: string): string =>
  `[${m.adapter}] ${what}\ncommands run so far:\n${historyOf(m)}`

/** Records the resolved command in the model's history (before the store is asked). */
export const logCommand = (m: WatchModel, line: string): void => {
  m.history.push(`${line}  @t=${m.now}`)
}

/** The store's answer must be the model's. */
export const expectOutcome = <A>(m: WatchModel, actual: Outcome<A>, expected: Outcome<A>): void => {
  expect(actual, context(m, "the store's outcome differs from the model's")).toEqual(expected)
}

const byWatchKey = (a: ProjectionWatch, b: ProjectionWatch) => watchKeyOf(a) < watchKeyOf(b) ? -1 : 1
const byOperationKey = (a: { callerDID: string; operationID: string }, b: { callerDID: string; operationID: string }) =>
  operationKeyOf(a) < operationKeyOf(b) ? -1 : 1

const expectRows = (m: WatchModel, rows: StoreRows, source: string): void => {
  expect([...rows.watches].sort(byWatchKey), context(m, `${source}: watch rows differ from the model's`))
    .toEqual([...m.watches.values()].sort(byWatchKey))
  expect([...rows.operations].sort(byOperationKey), context(m, `${source}: operation rows differ from the model's`))
    .toEqual([...m.operations.values()].sort(byOperationKey))
}

/**
 * After every command: every row of both tables, field by field, is the
 * model's; and `getWatch` of the identity the command touched agrees too.
 */
export const expectAgreement = async (m: WatchModel, r: RealStore, touched?: WatchIdentity): Promise<void> => {
  const [rows, read] = await Promise.all([
    r.rows(),
    touched === undefined
      ? undefined
      : r.run(Effect.flatMap(ConnectorStore, (s) => Effect.map(s.getWatch(touched), Option.getOrNull))).then(outcomeOf)
  ])
  expectRows(m, rows, "tables")
  if (touched !== undefined) {
    expect(read, context(m, "getWatch differs from the model's row")).toEqual({ ok: watchOf(m, touched) ?? null })
  }
}

/**
 * At the end of a run, through the snapshot port: both tables hold the
 * model's rows, and every other table of the store is untouched (empty).
 */
export const expectSnapshotAgreement = async (m: WatchModel, r: RealStore): Promise<void> => {
  const { rows, others } = await r.snapshot()
  expectRows(m, rows, "snapshot")
  for (const [table, content] of Object.entries(others)) {
    expect(content, context(m, `table ${table} was written`)).toEqual([])
  }
}
