import { type OperatorAction, type OperatorActionOutcome, type OperatorRepository, PersistenceError } from "@connector-store/core"
import type { SqlClient } from "@effect/sql/SqlClient"
import { Effect } from "effect"
import { epoch, type RawRow, rowDecoder, text } from "./internal/columns.js"
import { byteOrdered } from "./internal/collation.js"
import { rowReaders } from "./internal/queries.js"
import type { TableNames } from "./Tables.js"

const COLUMNS = "action_id, at, actor, action, targets, outcome, answer"

/** An audit entry as read from its table; the targets are a JSON array of text. */
const decodeOperatorAction = (row: RawRow): OperatorAction => {
  const targets: unknown = JSON.parse(text(row["targets"]))
  if (!Array.isArray(targets) || !targets.every((target) => typeof target === "string")) throw new TypeError("targets is not a list of ids")
  return {
    actionID: text(row["action_id"]),
    at: epoch(row["at"]),
    actor: text(row["actor"]),
    action: text(row["action"]),
    targets,
    outcome: text(row["outcome"]) as OperatorActionOutcome,
    answer: text(row["answer"])
  }
}

/** The audit log's half of the operator port over its SQL table: an append, and keyset pages newest first on its index. */
export const makeSqlOperatorActions = (
  sql: SqlClient,
  tables: TableNames
): Pick<OperatorRepository["Type"], "recordAction" | "listActions"> => {
  const table = sql(tables.operatorAction)
  const rows = rowReaders(rowDecoder(tables.operatorAction, ["action_id"], decodeOperatorAction))
  const id = byteOrdered(sql, "action_id")
  return {
    recordAction: (entry) =>
      Effect.asVoid(sql`INSERT INTO ${table} (action_id, at, actor, action, targets, outcome, answer)
        VALUES (${entry.actionID}, ${entry.at}, ${entry.actor}, ${entry.action}, ${JSON.stringify(entry.targets)},
          ${entry.outcome}, ${entry.answer})`).pipe(PersistenceError.refail("operator.recordAction")),
    listActions: (query) => {
      const clauses = [sql`1 = 1`]
      if (query.actor !== undefined) clauses.push(sql`actor = ${query.actor}`)
      if (query.action !== undefined) clauses.push(sql`action = ${query.action}`)
      if (query.after !== undefined) {
        clauses.push(sql`(at < ${query.after.at} OR (at = ${query.after.at} AND ${id} < ${query.after.actionID}))`)
      }
      return rows.healthy(
        "operator.listActions",
        sql<RawRow>`SELECT ${sql.literal(COLUMNS)} FROM ${table} WHERE ${sql.and(clauses)} ORDER BY at DESC, ${id} DESC LIMIT ${query.limit}`
      )
    }
  }
}
