import type { ProjectionWatch } from "@connector-store/core"
import { watchKeyOf } from "../WatchModel.js"
import type { Step } from "./plan.js"

/**
 * The model of the two tables a transaction test touches: each watch's
 * document and version by identity, and the operation keys. Deliberately
 * plain: no drafts, no locks; a transaction is just its steps applied in turn.
 */
export interface TxTables {
  readonly watches: Map<string, { readonly ownerDID: string; readonly documentID: string; readonly version: number }>
  readonly operations: Set<string>
}

/** The model of a transaction test run: the tables, and the commands run so far. */
export interface TxModel {
  tables: TxTables
  readonly history: Array<string>
}

/** No rows at all. */
export const emptyTables = (): TxTables => ({ watches: new Map(), operations: new Set() })

/** An independent copy to apply a transaction's steps to (its draft). */
export const copyOf = (tables: TxTables): TxTables => ({
  watches: new Map(tables.watches),
  operations: new Set(tables.operations)
})

/** Applies `step` to `tables` and returns what the step should see (as `runStep` words it). */
export const applyStep = (tables: TxTables, step: Step): string => {
  if (step.kind === "insertOperation") {
    const key = `did:caller:x|${step.operationID}`
    if (tables.operations.has(key)) return "false"
    tables.operations.add(key)
    return "true"
  }
  const key = watchKeyOf(step.identity)
  const row = tables.watches.get(key)
  switch (step.kind) {
    case "insertWatch": {
      const clash = row !== undefined || [...tables.watches.values()].some((other) =>
        other.ownerDID === step.identity.ownerDID && other.documentID === step.documentID
      )
      if (clash) return "false"
      tables.watches.set(key, { ownerDID: step.identity.ownerDID, documentID: step.documentID, version: 0 })
      return "true"
    }
    case "readWatch":
      return row === undefined ? "absent" : `v${row.version}`
    case "deleteWatch":
      if (row === undefined) return "absent"
      tables.watches.delete(key)
      return "deleted"
    case "bumpWatch":
      if (row === undefined) return "absent"
      tables.watches.set(key, { ...row, version: row.version + 1 })
      return `v${row.version + 1}`
  }
}

/** A comparable picture of the watch table: `key -> document@version`. */
export const watchPicture = (rows: Iterable<Pick<ProjectionWatch, "documentID" | "version"> & { readonly key: string }>) =>
  Object.fromEntries([...rows].map((row) => [row.key, `${row.documentID}@v${row.version}`]).sort(([a], [b]) => a! < b! ? -1 : 1))

/** A comparable picture of both tables. */
export const pictureOf = (tables: TxTables) => ({
  watches: watchPicture([...tables.watches].map(([key, row]) => ({ key, ...row }))),
  operations: [...tables.operations].sort()
})
