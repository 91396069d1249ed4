import type { ConnectorOperation, OperationState, ProjectionWatch } from "@connector-store/core"
import { operationIndexOf, type SimulationPlan } from "./plan.js"
import { doubleApplies, type LedgerEntry } from "./provider.js"

/** One invariant the run checks, and what broke it. */
export interface InvariantCheck {
  readonly name: string
  readonly holds: boolean
  /** What was checked (how many rows, writes, deletions). */
  readonly detail: string
  /** Each violation, readable on its own (at most 20 listed). */
  readonly violations: ReadonlyArray<string>
}

/** A local deletion the relist sweep applied, as the end of the run finds it. */
export interface CheckedDeletion {
  readonly documentID: string
  readonly entityID: string
  readonly runID: string
  /** The state of the run the deletion came from. */
  readonly runState: string
  /** True when the provider still has the entity. */
  readonly stillAtProvider: boolean
}

/** What the invariant checks look at: the stored rows, the provider's ledger and the sweep's deletions. */
export interface InvariantInputs {
  readonly plan: SimulationPlan
  readonly rows: ReadonlyArray<ConnectorOperation>
  readonly watches: ReadonlyArray<ProjectionWatch>
  readonly ledger: ReadonlyArray<LedgerEntry>
  readonly deletions: ReadonlyArray<CheckedDeletion>
  /** The ids of the entities the provider holds at the end. */
  readonly entitiesAtProvider: ReadonlyArray<string>
  readonly incompleteRefused: number
  readonly incompleteListed: number
  /** True when every planned write reached a final state (retention ran only then). */
  readonly finished: boolean
  readonly collected: number
}

const check = (name: string, detail: string, violations: ReadonlyArray<string>): InvariantCheck => ({
  name,
  holds: violations.length === 0,
  detail,
  violations: violations.slice(0, 20)
})

/**
 * The run's invariants, from what the store holds and what the provider
 * saw: no write applied twice except by a sanctioned reissue (a re-send the
 * store handed out after a request may have landed), as the testkit's
 * provider model judges its ledger (`doubleApplies`); every committed write
 * applied and watched, every committed delete's entity gone and its watch
 * retired; no write reported dead that the provider applied; no local
 * deletion from a relist run that was not complete, or of an entity the
 * provider still has; retention took only superseded writes.
 */
export const checkInvariants = (inputs: InvariantInputs): ReadonlyArray<InvariantCheck> => {
  const { plan, rows, watches, ledger, deletions, incompleteRefused, incompleteListed, finished, collected } = inputs
  const atProvider = new Set(inputs.entitiesAtProvider)
  const byState: Record<OperationState, number> = { attempted: 0, committed: 0, dead: 0, reconcile_only: 0 }
  for (const row of rows) byState[row.state]++
  const appliedBy = new Map<number, number>()
  for (const entry of ledger) if (entry.applied) appliedBy.set(entry.opIndex, (appliedBy.get(entry.opIndex) ?? 0) + 1)
  const indexOf = (row: ConnectorOperation) => operationIndexOf(row.operationID, plan.runTag)

  const twice = doubleApplies(ledger).map((v) => v.detail)
  const committedUnapplied: Array<string> = []
  const deadApplied: Array<string> = []
  for (const row of rows) {
    const index = indexOf(row)
    if (index === undefined) continue
    const applied = appliedBy.get(index) ?? 0
    // A delete whose entity was already gone (deleted elsewhere) is done without applying anything.
    const goneBefore = row.op === "delete" && row.sourceID !== null && !atProvider.has(row.sourceID)
    if (row.state === "committed" && applied === 0 && !goneBefore) {
      committedUnapplied.push(`${row.operationID}: committed, but no request of it was applied`)
    }
    // A dead operation still in doubt reads as unconfirmed, not failed: only one the store calls failed counts.
    if (row.state === "dead" && row.inDoubtSince === null && applied > 0) {
      deadApplied.push(`${row.operationID}: reported failed (dead, ${row.lastKind}, not in doubt), but the provider applied it`)
    }
  }

  const watchBySource = new Map(watches.map((w) => [w.sourceID, w]))
  const deletedDocuments = new Set(rows.filter((r) => r.op === "delete" && r.state === "committed").map((r) => r.documentID))
  const unwatched: Array<string> = []
  const deletesUndone: Array<string> = []
  for (const row of rows) {
    if (row.state !== "committed") continue
    const watch = row.sourceID === null ? undefined : watchBySource.get(row.sourceID)
    if (row.op === "delete") {
      if (watch !== undefined) deletesUndone.push(`${row.operationID}: committed delete, but the watch of ${row.sourceID} remains`)
      if (row.sourceID !== null && atProvider.has(row.sourceID)) {
        deletesUndone.push(`${row.operationID}: committed delete, but ${row.sourceID} still exists at the provider`)
      }
      continue
    }
    // A later committed delete of the document retired this write's watch.
    if (deletedDocuments.has(row.documentID)) continue
    if (watch === undefined || watch.documentID !== row.documentID) unwatched.push(`${row.operationID}: committed without a watch on ${row.documentID}`)
  }

  const badDeletions: Array<string> = []
  for (const deletion of deletions) {
    if (deletion.runState !== "complete") badDeletions.push(`${deletion.documentID}: deleted from run ${deletion.runID}, which is ${deletion.runState}`)
    if (deletion.stillAtProvider) badDeletions.push(`${deletion.documentID}: deleted locally, but ${deletion.entityID} still exists at the provider`)
  }
  if (incompleteListed > 0) badDeletions.push(`${incompleteListed} candidate listings were answered by a relist run that had not listed to its end`)

  const present = new Set(rows.map((r) => r.operationID))
  const badCollections: Array<string> = []
  for (const op of plan.operations) {
    if (present.has(op.operationID) || !finished) continue
    const newer = plan.operations.some((o) => o.index > op.index && o.document.index === op.document.index && present.has(o.operationID))
    if (!newer) badCollections.push(`${op.operationID}: gone, though no newer write of ${op.document.documentID} is stored`)
  }

  return [
    check(
      "no write applied twice at the provider except by a sanctioned reissue",
      `${ledger.filter((e) => e.applied).length} applied requests over ${appliedBy.size} operations; ${ledger.length} requests in all`,
      twice
    ),
    check("every committed write was applied at the provider", `${byState.committed} committed operations`, committedUnapplied),
    check("no write reported failed (dead, not in doubt) was applied at the provider", `${byState.dead} dead operations`, deadApplied),
    check("every committed write's watch is verified or reported", `${byState.committed} committed operations, ${watches.length} watches`, unwatched),
    check(
      "every committed delete removed its entity and retired its watch",
      `${rows.filter((r) => r.op === "delete" && r.state === "committed").length} committed deletes`,
      deletesUndone
    ),
    check(
      "no deletion from an incomplete relist",
      `${deletions.length} local deletions, ${incompleteRefused} listings of incomplete runs refused`,
      badDeletions
    ),
    check("retention collected only superseded finished writes", `${collected} collected`, badCollections)
  ]
}
