import type { ClaimOperationInput, ConnectorOperation, ReissueIntent } from "@connector-store/core"
import { digestOf, seeded } from "./random.js"

/** The one account the simulation syncs: a user's calendar at a fake provider. */
export interface SimulationScope {
  readonly ownerDID: string
  readonly connectorName: string
  readonly model: string
  readonly accountKey: string
}

/** The devices of the user that edit documents; each is a caller with its own idempotency keys. */
export const DEVICES = ["did:example:laptop", "did:example:phone", "did:example:tablet"] as const

/** A local document and the provider entity it projects to. */
export interface PlannedDocument {
  readonly index: number
  readonly documentID: string
  /** The provider entity id (for a document created locally: the deterministic id its create sends). */
  readonly entityID: string
  /** True when the provider already has the entity before the run (the first write is an update). */
  readonly existsAtProvider: boolean
  /** True when the provider normalizes what it stores, so its state never projects back to the local one. */
  readonly lossy: boolean
  /** The content both sides hold before the run (for an existing entity). */
  readonly initialContent: DocumentContent
}

/** What a document holds. */
export interface DocumentContent {
  readonly title: string
  readonly revision: number
  readonly by: string
}

/** One write-back the user's edits cause: a create, an update or a delete of one document's entity. */
export interface PlannedOperation {
  readonly index: number
  readonly callerDID: string
  readonly operationID: string
  readonly document: PlannedDocument
  readonly op: "create" | "update" | "delete"
  /** What the write sends (and the document's winner once the edit is made locally); a delete sends none of it. */
  readonly content: DocumentContent
  /** The operation on the same document that must finish first, if any. */
  readonly after: number | null
}

/** Every document and operation of a run, fully determined by the seed (ids also carry the run tag). */
export interface SimulationPlan {
  /** Tags every id of the run, so runs on one database never meet. */
  readonly runTag: string
  readonly scope: SimulationScope
  readonly documents: ReadonlyArray<PlannedDocument>
  readonly operations: ReadonlyArray<PlannedOperation>
}

/**
 * The run's documents and write-backs. About a third of the documents are
 * new locally (their first write is a create with a deterministic provider
 * id), the rest exist at the provider; about one operation in five is a
 * follow-up edit of a document edited before, so retention has superseded
 * rows to collect, and about one follow-up in seven deletes its document
 * (the document's last write); a few documents are lossy at the provider
 * (they end as `repair_failed` watches).
 */
export const makePlan = (seed: string | number, runTag: string, operations: number): SimulationPlan => {
  const scope: SimulationScope = {
    ownerDID: `did:example:user-${runTag}`,
    connectorName: "calendar",
    model: "Event",
    accountKey: `user-${runTag}@example.com`
  }
  const draw = seeded(seed, "plan")
  const documentCount = Math.max(1, Math.ceil(operations * 0.8))
  const documents: Array<PlannedDocument> = []
  for (let i = 0; i < documentCount; i++) {
    const existsAtProvider = !draw.chance(0.35)
    documents.push({
      index: i,
      documentID: `doc-${runTag}-${i}`,
      entityID: `evt-${runTag}-${i}`,
      existsAtProvider,
      lossy: draw.chance(0.06),
      initialContent: { title: `Meeting ${i}`, revision: 0, by: "provider" }
    })
  }
  const lastOn = new Map<number, number>()
  const revisions = new Map<number, number>()
  const planned: Array<PlannedOperation> = []
  // Documents a planned delete removed: they take no later write.
  const alive = [...documents]
  for (let i = 0; i < operations; i++) {
    const followUp = i >= documentCount
    const document = followUp ? draw.pick(alive) : documents[i]!
    const previous = lastOn.get(document.index)
    const revision = (revisions.get(document.index) ?? 0) + 1
    revisions.set(document.index, revision)
    const callerDID = DEVICES[draw.int(0, DEVICES.length - 1)]!
    const deletes = followUp && alive.length > 1 && draw.chance(0.15)
    if (deletes) alive.splice(alive.indexOf(document), 1)
    planned.push({
      index: i,
      callerDID,
      operationID: `op-${runTag}-${i}`,
      document,
      op: deletes ? "delete" : previous === undefined && !document.existsAtProvider ? "create" : "update",
      content: deletes
        ? { title: `Meeting ${document.index} (deleted)`, revision, by: callerDID }
        : { title: `Meeting ${document.index} (edit ${revision})`, revision, by: callerDID },
      after: previous ?? null
    })
    lastOn.set(document.index, i)
  }
  return { runTag, scope, documents, operations: planned }
}

/** The operation index an operation id of this run carries, or `undefined` for another run's. */
export const operationIndexOf = (operationID: string, runTag: string): number | undefined => {
  const prefix = `op-${runTag}-`
  if (!operationID.startsWith(prefix)) return undefined
  const index = Number(operationID.slice(prefix.length))
  return Number.isSafeInteger(index) ? index : undefined
}

/**
 * The claim of a planned write. `baseEtag` is the provider etag the edit is
 * based on (the last one the device saw): a re-send after a request may have
 * landed is conditional on it. A create's re-send carries its deterministic
 * id; a delete's re-send is the delete again (gone means applied).
 */
export const claimInputOf = (
  scope: SimulationScope,
  op: PlannedOperation,
  baseEtag: string | null
): ClaimOperationInput => {
  const reissueIntent: ReissueIntent = op.op === "create"
    ? { kind: "deterministic-create", providerID: op.document.entityID }
    : op.op === "delete"
    ? { kind: "idempotent-delete" }
    : baseEtag === null
    ? { kind: "reconcile" }
    : { kind: "conditional-update", ifMatch: baseEtag }
  return {
    callerDID: op.callerDID,
    operationID: op.operationID,
    ...scope,
    op: op.op,
    target: "calendars/primary",
    sourceID: op.op === "create" ? null : op.document.entityID,
    deterministicEventID: op.document.entityID,
    payloadHash: digestOf(op.content),
    reissueIntent,
    providerEtag: baseEtag,
    documentID: op.document.documentID
  }
}

/** The claim that re-drives a stored operation: the stored row is the input (a replay converges on it). */
export const claimInputOfRow = (row: ConnectorOperation): ClaimOperationInput => ({
  callerDID: row.callerDID,
  operationID: row.operationID,
  ownerDID: row.ownerDID,
  connectorName: row.connectorName,
  model: row.model,
  op: row.op,
  accountKey: row.accountKey,
  target: row.target,
  sourceID: row.sourceID,
  deterministicEventID: row.deterministicEventID,
  payloadHash: row.payloadHash,
  reissueIntent: row.reissueIntent as ReissueIntent,
  providerEtag: row.providerEtag,
  documentID: row.documentID
})
