import {
  type ConnectorOperation,
  type CorruptRowReport,
  isInDoubt,
  type ProjectionWatch,
  type RelistRun,
  type SweepCandidate
} from "@connector-store/core"
import { Console, Effect, Logger, LogLevel } from "effect"
import { renderFields, renderTable } from "./table.js"
import { age, isoTime, relativeTime } from "./time.js"

const iso = (ms: number | null): string | null => ms === null ? null : new Date(ms).toISOString()

/** An operation as the CLI's JSON shows it: times as ISO strings, the in-doubt fact spelled out. */
export const operationJson = (row: ConnectorOperation) => ({
  ...row,
  inDoubt: isInDoubt(row),
  nextAttemptAt: iso(row.nextAttemptAt),
  leaseExpiresAt: iso(row.leaseExpiresAt),
  createdAt: iso(row.createdAt),
  updatedAt: iso(row.updatedAt)
})

/** A watch as the CLI's JSON shows it. */
export const watchJson = (row: ProjectionWatch) => ({
  ...row,
  nextAttemptAt: iso(row.nextAttemptAt),
  claimedUntil: iso(row.claimedUntil),
  createdAt: iso(row.createdAt),
  updatedAt: iso(row.updatedAt)
})

/** A relist run as the CLI's JSON shows it. */
export const runJson = (row: RelistRun) => ({
  ...row,
  startedAt: iso(row.startedAt),
  updatedAt: iso(row.updatedAt),
  completedAt: iso(row.completedAt),
  endedAt: iso(row.endedAt)
})

/** Prints `value` as indented JSON. */
export const printJson = (value: unknown) => Console.log(JSON.stringify(value, null, 2))

/** The table of a page of operations, relative times against `now`. */
export const operationsTable = (rows: ReadonlyArray<ConnectorOperation>, now: number): string =>
  renderTable(
    ["CALLER", "OPERATION", "STATE", "IN DOUBT", "ATTEMPTS", "NEXT ATTEMPT", "OWNER", "CONNECTOR", "DOCUMENT", "UPDATED"],
    rows.map((row) => [
      row.callerDID,
      row.operationID,
      row.state,
      isInDoubt(row) ? "yes" : "no",
      String(row.attempts),
      relativeTime(row.nextAttemptAt, now),
      row.ownerDID,
      row.connectorName,
      row.documentID ?? "-",
      relativeTime(row.updatedAt, now)
    ])
  )

/** The table of a page of watches. */
export const watchesTable = (rows: ReadonlyArray<ProjectionWatch>, now: number): string =>
  renderTable(
    ["OWNER", "CONNECTOR", "MODEL", "ACCOUNT", "SOURCE", "DOCUMENT", "STATUS", "ATTEMPTS", "GENERATION", "NEXT ATTEMPT"],
    rows.map((row) => [
      row.ownerDID,
      row.connectorName,
      row.model,
      row.accountKey,
      row.sourceID,
      row.documentID,
      row.verificationStatus,
      String(row.verificationAttempts),
      String(row.repairGeneration),
      relativeTime(row.nextAttemptAt, now)
    ])
  )

/** The table of a page of relist runs. */
export const runsTable = (rows: ReadonlyArray<RelistRun>, now: number): string =>
  renderTable(
    ["RUN", "STATE", "OWNER", "CONNECTOR", "MODEL", "ACCOUNT", "PAGES", "STARTED", "ENDED"],
    rows.map((row) => [
      row.runID,
      row.state,
      row.ownerDID,
      row.connectorName,
      row.model,
      row.accountKey,
      String(row.pagesCommitted),
      relativeTime(row.startedAt, now),
      relativeTime(row.endedAt ?? row.completedAt, now)
    ])
  )

const when = (ms: number | null, now: number) => ms === null ? "-" : `${isoTime(ms)} (${age(ms, now)})`
const jsonText = (value: unknown) => value === null || value === undefined ? "-" : JSON.stringify(value)

/** Every field of one operation, its history included, one per line. */
export const operationFields = (row: ConnectorOperation, now: number): string =>
  renderFields([
    ["caller", row.callerDID],
    ["operation", row.operationID],
    ["node key", row.nodeKey],
    ["state", row.state],
    ["in doubt", isInDoubt(row) ? `yes (request of run ${row.sendMarker} may have landed)` : "no"],
    ["owner", row.ownerDID],
    ["connector", row.connectorName],
    ["model", row.model],
    ["op", row.op],
    ["account", row.accountKey],
    ["target", row.target],
    ["source", row.sourceID ?? "-"],
    ["document", row.documentID ?? "-"],
    ["attempts", String(row.attempts)],
    ["next attempt", when(row.nextAttemptAt, now)],
    ["last failure", row.lastKind === null ? "-" : `${row.lastKind}${row.lastHTTPStatus === null ? "" : ` (HTTP ${row.lastHTTPStatus})`}`],
    ["deferred for", row.deferReason ?? "-"],
    ["reissue intent", jsonText(row.reissueIntent)],
    ["provider etag", row.providerEtag ?? "-"],
    ["result entity", jsonText(row.resultEntity)],
    ["lease", row.leaseToken === null ? "-" : `held until ${when(row.leaseExpiresAt, now)}`],
    ["version", String(row.version)],
    ["created", when(row.createdAt, now)],
    ["updated", when(row.updatedAt, now)]
  ])

/** Every field of one watch, one per line. */
export const watchFields = (row: ProjectionWatch, now: number): string =>
  renderFields([
    ["owner", row.ownerDID],
    ["connector", row.connectorName],
    ["model", row.model],
    ["account", row.accountKey],
    ["source", row.sourceID],
    ["document", row.documentID],
    ["status", row.verificationStatus],
    ["attempts", String(row.verificationAttempts)],
    ["generation", String(row.repairGeneration)],
    ["verified digest", row.verifiedStateDigest ?? "-"],
    ["observed winner", row.observedWinnerDigest ?? "-"],
    ["next attempt", when(row.nextAttemptAt, now)],
    ["claimed until", when(row.claimedUntil, now)],
    ["deferred for", row.deferReason ?? "-"],
    ["version", String(row.version)],
    ["created", when(row.createdAt, now)],
    ["updated", when(row.updatedAt, now)]
  ])

/** Prints JSON when `json`, the text otherwise. */
export const output = (json: boolean, value: () => unknown, text: () => string) =>
  Effect.suspend(() => json ? printJson(value()) : Console.log(text()))

/** The table of sweep candidates. */
export const candidatesTable = (rows: ReadonlyArray<SweepCandidate>): string =>
  renderTable(
    ["SOURCE", "DOCUMENT", "KIND", "STATUS", "APPLY ATTEMPTS", "LAST ERROR"],
    rows.map((row) => [
      row.sourceID,
      row.documentID,
      row.kind,
      row.status,
      String(row.applyAttempts),
      row.lastErrorKind === null ? "-" : `${row.lastErrorKind}: ${row.lastErrorMessage ?? ""}`
    ])
  )

/** The line that marks one row a list left out because it cannot be decoded. */
export const corruptLine = (report: CorruptRowReport): string =>
  visible(`CORRUPT ${report.table} ${report.key}: column ${report.column} cannot be decoded: ${report.detail}`)

/** `text` with its control characters written as `\uXXXX`, so a stored value cannot move the terminal. */
const visible = (text: string): string =>
  text.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)

/**
 * A page as text: the table of its `items` (or `empty` when it has none),
 * then one `CORRUPT` line per row it left out because it cannot be decoded.
 */
export const pageText = <A>(
  items: ReadonlyArray<A>,
  corrupt: ReadonlyArray<CorruptRowReport>,
  empty: string,
  table: (items: ReadonlyArray<A>) => string
): string => {
  const marked = corrupt.map(corruptLine)
  if (items.length === 0) return marked.length === 0 ? empty : marked.join("\n")
  return [table(items), ...(marked.length === 0 ? [] : ["", ...marked])].join("\n")
}

/** A stored value as `show` prints it raw: text as it is, anything else as JSON, SQL null as `NULL`. */
const rawValue = (value: unknown): string =>
  value === null || value === undefined ? "NULL" : typeof value === "string" ? value : typeof value === "bigint" ? String(value) : JSON.stringify(value)

/**
 * Every column of a stored row that cannot be decoded, raw, one per line,
 * the one that failed marked with why; then what the operator guide says to do.
 */
export const rawRowFields = (row: Readonly<Record<string, unknown>>, report: CorruptRowReport): string =>
  [
    `CORRUPT: row ${report.key} of ${report.table} cannot be decoded (column ${report.column}: ${report.detail})`,
    "",
    renderFields(Object.entries(row).map(([column, value]): readonly [string, string] => [
      column,
      column === report.column ? `${rawValue(value)}   <- cannot be decoded: ${report.detail}` : rawValue(value)
    ])),
    "",
    "Repair the marked column with SQL, or delete the row (docs/operator-guide.md, \"Rows that cannot be decoded\")."
  ].join("\n")

/**
 * `effect` without the store's warnings about rows it cannot decode (nor
 * any other below an error): for a command that shows those rows itself,
 * so its table or JSON stays clean.
 */
export const quietly = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Logger.withMinimumLogLevel(effect, LogLevel.Error)
