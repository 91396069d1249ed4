import type { ConnectorOperation, ProjectionWatch, WatchIdentity } from "@connector-store/core"
import { START_TIME } from "./universe.js"
import type { WinnerState } from "./world.js"

/**
 * The model of a store: plain tables keyed by identity, the clock and the
 * document store's winners as the model believes them, and the commands run
 * so far (for failure messages). Commands change it by the spec's rules,
 * written out in each command's file without the code under test.
 */
export interface WatchModel {
  readonly adapter: string
  now: number
  readonly winners: Map<string, WinnerState>
  readonly watches: Map<string, ProjectionWatch>
  readonly operations: Map<string, ConnectorOperation>
  readonly history: Array<string>
}

/** A fresh model: no rows, clock at `START_TIME`, every winner `w1` (as `World.reset`). */
export const emptyModel = (adapter: string, documents: ReadonlyArray<string>): WatchModel => ({
  adapter,
  now: START_TIME,
  winners: new Map(documents.map((doc) => [doc, "w1"])),
  watches: new Map(),
  operations: new Map(),
  history: []
})

/** The model's key of a watch identity. */
export const watchKeyOf = (id: WatchIdentity): string =>
  [id.ownerDID, id.connectorName, id.model, id.accountKey, id.sourceID].join("|")

/** The model's key of an operation. */
export const operationKeyOf = (op: { readonly callerDID: string; readonly operationID: string }): string =>
  `${op.callerDID}|${op.operationID}`

/** A watch row after one write at `at`: every write bumps the version and stamps the time. */
export const rewritten = (row: ProjectionWatch, at: number, patch: Partial<ProjectionWatch>): ProjectionWatch => ({
  ...row,
  ...patch,
  version: row.version + 1,
  updatedAt: at
})

/** The watch of `id` in the model, if it has one. */
export const watchOf = (m: WatchModel, id: WatchIdentity): ProjectionWatch | undefined => m.watches.get(watchKeyOf(id))

/** Stores `row` in the model. */
export const putWatch = (m: WatchModel, row: ProjectionWatch): void => {
  m.watches.set(watchKeyOf(row), row)
}

/** The last commands run, newest last, for assertion messages. */
export const historyOf = (m: WatchModel): string =>
  m.history.map((line, i) => `  ${String(i + 1).padStart(2)}. ${line}`).join("\n")
