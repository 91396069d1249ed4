import type { ClaimOperationInput, PromiseConnectorStore } from "@connector-store/core"

/**
 * A provider of calendar events for the failover tests: each edit updates its own event, whose etag starts at `etag-0`;
 * an update applies unless its `If-Match` names another etag (a 412), and every application is counted, so an edit
 * applied twice (a blind re-send) shows.
 */
export class EventLedger {
  private readonly etags = new Map<string, string>()
  /** How many times each edit (by operation id) was applied. */
  readonly applied = new Map<string, number>()

  /** An update of `sourceID` by `operationID`; with `ifMatch`, applied only while the event still has that etag. */
  update(sourceID: string, operationID: string, ifMatch?: string): { readonly status: 200; readonly etag: string } | { readonly status: 412 } {
    const current = this.etags.get(sourceID) ?? "etag-0"
    if (ifMatch !== undefined && ifMatch !== current) return { status: 412 }
    const etag = `etag-${operationID}`
    this.etags.set(sourceID, etag)
    this.applied.set(operationID, (this.applied.get(operationID) ?? 0) + 1)
    return { status: 200, etag }
  }

  /** The event's etag now. */
  lookup(sourceID: string): string {
    return this.etags.get(sourceID) ?? "etag-0"
  }

  /** The edits applied more than once. */
  get doubleApplied(): number {
    return Array.from(this.applied.values()).filter((n) => n > 1).length
  }
}

/** Edit `n` of a run: an update of its own event, re-sendable as a conditional update unless `reconcile` (every 10th). */
export const editOf = (n: number, owner = "did:owner:failover"): ClaimOperationInput => ({
  callerDID: "did:caller:failover",
  operationID: `edit-${n}`,
  ownerDID: owner,
  connectorName: "gcal",
  model: "Event",
  op: "update",
  accountKey: "acct-1",
  target: "calendar/primary",
  sourceID: `event-${n}`,
  deterministicEventID: `event-${n}`,
  payloadHash: `hash-${n}`,
  reissueIntent: n % 10 === 0 ? { kind: "reconcile" } : { kind: "conditional-update", ifMatch: "etag-0" },
  providerEtag: "etag-0",
  documentID: `doc-${n}`
})

/** How one write-back ended. */
export type WriteBackEnd = "committed" | "reissued" | "already" | "reconcile_only" | "dead" | "busy" | "scheduled"

/**
 * One write-back as the README writes it: claim (marked sent), send as the claim's `reissue` allows (a conditional re-send
 * looks the event up on a 412: ours landed, or someone else's did), finalize. `already` is an edit the store had committed.
 */
export const writeBack = async (
  store: Pick<PromiseConnectorStore<unknown>, "claimOperation" | "finalizeOperationAndArmWatch">,
  input: ClaimOperationInput,
  ledger: EventLedger,
  watchDueAt: number
): Promise<WriteBackEnd> => {
  const claim = await store.claimOperation({ ...input, markSent: true })
  if (claim.outcome === "finished") return claim.operation.state === "committed" ? "already" : claim.operation.state as "dead" | "reconcile_only"
  if (claim.outcome !== "claimed") return claim.outcome
  const ifMatch = claim.reissue?.kind === "conditional-update" ? claim.reissue.ifMatch : undefined
  const sent = ledger.update(input.sourceID!, input.operationID, claim.reissue === null ? undefined : ifMatch)
  const etag = sent.status === 200 ? sent.etag : ledger.lookup(input.sourceID!)
  await store.finalizeOperationAndArmWatch(input, {
    leaseToken: claim.lease.token,
    sourceID: input.sourceID!,
    documentID: input.documentID!,
    providerEtag: etag,
    resultEntity: { id: input.sourceID, etag },
    watchDueAt
  })
  return claim.reissue === null ? "committed" : "reissued"
}

/** How many write-backs ended each way. */
export const tally = (ends: ReadonlyArray<WriteBackEnd>): Partial<Record<WriteBackEnd, number>> => {
  const out: Partial<Record<WriteBackEnd, number>> = {}
  for (const end of ends) out[end] = (out[end] ?? 0) + 1
  return out
}
