import { randomBytes } from "node:crypto"
import { openConnectorStore } from "@connector-store/sql-adapter"
import { realClock } from "./clock.js"
import { claimInputOf, makePlan } from "./plan.js"
import { CalendarProvider, type FaultPlan } from "./provider.js"
import { digestOf } from "./random.js"
import { describeDatabase, SIMULATION_POLICY, WATCH_DELAY_MS } from "./simulation.js"
import { requestFor } from "./writeBack.js"

/** One step of the walkthrough: when (since the start), and what it means. */
export interface WalkthroughStep {
  readonly atMs: number
  readonly meaning: string
}

/** The walkthrough of one write-back: its steps, and the same as text. */
export interface Walkthrough {
  readonly steps: ReadonlyArray<WalkthroughStep>
  readonly text: string
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** A relative time a person reads: `+0 ms`, `+620 ms`, `+1.25 s`. */
export const relative = (ms: number): string => (ms < 1_000 ? `+${ms} ms` : `+${(ms / 1000).toFixed(2)} s`)

/**
 * Walks one write-back through the store, for a newcomer: an edit is
 * claimed, its request marked sent, the provider applies it but the answer
 * is lost and the runner stalls; once the lease lapses a second runner
 * takes over, is handed a safe reissue, re-sends conditionally, is refused
 * because the first request had landed, looks the entity up and commits,
 * arming the watch in the same transaction; the stalled runner comes back
 * and is fenced off; the verifier verifies the watch. One line of meaning
 * per step, times relative to the start.
 */
export const explainWriteBack = async (options: {
  readonly database: string
  readonly tablePrefix?: string | undefined
  readonly prepareStatements?: boolean | undefined
}): Promise<Walkthrough> => {
  const plan = makePlan("explain", randomBytes(4).toString("hex"), 1)
  const scripted: ReadonlyArray<FaultPlan> = [
    { fault: "timeout-after-apply", latencyMs: 5, retryAfterMs: 0 },
    { fault: "none", latencyMs: 5, retryAfterMs: 0 }
  ]
  const provider = new CalendarProvider("explain", (_op, n) => scripted[n - 1] ?? scripted[1]!)
  const document = { ...plan.documents[0]!, existsAtProvider: true }
  const op = { ...plan.operations[0]!, document, op: "update" as const }
  const before = provider.seedEntity(document.entityID, document.initialContent, document.documentID)
  const winners = new Map([[document.documentID, digestOf(document.initialContent)]])
  const store = await openConnectorStore({
    url: options.database,
    tablePrefix: options.tablePrefix,
    prepareStatements: options.prepareStatements,
    readWinner: (id) => winners.get(id) ?? null,
    operationPolicy: SIMULATION_POLICY
  })
  const started = Date.now()
  const steps: Array<WalkthroughStep> = []
  const say = (meaning: string) => steps.push({ atMs: Date.now() - started, meaning })
  const at = (epochMs: number) => relative(epochMs - started)
  try {
    const input = claimInputOf(plan.scope, op, before.etag)
    const key = { callerDID: input.callerDID, operationID: input.operationID }
    winners.set(document.documentID, digestOf(op.content))
    say(`The user edits "${document.initialContent.title}" on their laptop. The local document store now holds the edit ` +
      `(its winner); the connector must write it back to the calendar provider exactly once, whatever fails.`)

    const claimA = await store.claimOperation(input)
    if (claimA.outcome !== "claimed") throw new Error(`the walkthrough's new key was not claimed: ${claimA.outcome}`)
    say(`Runner A claims the write under the laptop's idempotency key "${key.operationID}": a new operation, state ` +
      `${claimA.operation.state}. A holds the lease until ${at(claimA.lease.expiresAt)}; no other runner may drive it before then.`)
    const replay = await store.claimOperation(input)
    say(`The same claim again (the app restarted and queued the edit twice): ${replay.outcome}. Still one operation, one lease holder.`)

    const sentA = await store.markOperationSent(key, { leaseToken: claimA.lease.token })
    say(`Runner A marks its request sent before it leaves (${sentA.outcome}): attempt ${sentA.operation?.attempts ?? "?"} is ` +
      `counted. From here on the store knows a request may have landed.`)
    const first = await provider.write(requestFor(op, null), realClock)
    say(`The provider applies the update, but its answer never arrives (${first.status}). Runner A stalls ` +
      `(a long pause) before recording anything.`)

    const leaseEnds = claimA.lease.expiresAt
    await sleep(Math.max(0, leaseEnds - Date.now()) + 20)
    const due = await store.listDueOperations(Date.now(), {})
    const listed = due.operations.some((row) => row.operationID === key.operationID)
    say(`A's lease lapsed at ${at(leaseEnds)}. The due sweep ${listed ? "lists" : "does not list"} the operation: still ` +
      `attempted, and due since its lease ran out.`)

    const claimB = await store.claimOperation(input)
    if (claimB.outcome !== "claimed") throw new Error(`the takeover was not claimed: ${claimB.outcome}`)
    const reissue = claimB.reissue
    say(reissue === null
      ? `Runner B takes the operation over, and the store hands it no reissue, as if A's request had never left: ` +
        `a plain re-send now could apply the edit twice.`
      : reissue.kind === "conditional-update"
      ? `Runner B takes the operation over. Because A's request may have landed, the store hands B a reissue: re-send only ` +
        `as an update conditional on the provider etag the edit was based on (${reissue.ifMatch}), never blindly.`
      : reissue.kind === "deterministic-create"
      ? `Runner B takes the operation over, with a reissue: re-send only as a create with the deterministic id ${reissue.providerID}.`
      : `Runner B takes the operation over, with a reissue: re-send the delete; "gone" means it landed.`)
    const sentB = await store.markOperationSent(key, { leaseToken: claimB.lease.token })
    say(`Runner B marks its request sent (${sentB.outcome}): attempt ${sentB.operation?.attempts ?? "?"}.`)
    const second = await provider.write(requestFor(op, reissue), realClock)
    if (second.status === 412) {
      say(`The provider refuses the conditional update: 412, the etag has moved. So A's request had landed.`)
      const found = provider.read(document.entityID)!
      const done = await store.finalizeOperationAndArmWatch(key, {
        leaseToken: claimB.lease.token,
        sourceID: found.id,
        documentID: document.documentID,
        providerEtag: found.etag,
        resultEntity: found,
        watchDueAt: Date.now() + WATCH_DELAY_MS
      })
      say(`Runner B looks the event up: it carries the edit. B finalizes: the operation is ${done.outcome}, with the ` +
        `provider's new etag, and in the same transaction a projection watch is armed on the document, due in ${WATCH_DELAY_MS} ms.`)
    } else {
      say(`The provider answers ${second.status} to B's re-send.`)
    }

    const late = await store.recordAttemptFailure(key, { leaseToken: claimA.lease.token, kind: "retryable" })
    say(`Runner A wakes up and reports its timeout with its old lease: ${late.outcome}. Its lease was taken over, so ` +
      `nothing it writes counts any more.`)

    const watch = await store.getWatchByDocument(document.documentID)
    if (watch !== null) {
      // A timer may fire a millisecond early; the claim must see the watch due.
      await sleep(Math.max(0, (watch.nextAttemptAt ?? 0) - Date.now()) + 5)
      const identity = { ownerDID: watch.ownerDID, connectorName: watch.connectorName, model: watch.model, accountKey: watch.accountKey, sourceID: watch.sourceID }
      // Long enough that a loaded machine still verifies inside the claim.
      const until = Date.now() + 5_000
      const claimed = await store.claimWatchAttempt(identity, { generation: watch.repairGeneration, until, now: Date.now() })
      const fetched = provider.read(watch.sourceID)
      const verdict = await store.recordVerification(identity, {
        generation: watch.repairGeneration,
        claimedUntil: until,
        fetchedDigest: fetched === undefined ? null : digestOf(fetched.content),
        maxAttempts: 3,
        dueAt: Date.now() + 100
      })
      say(`The verifier ${claimed ? "claims" : "could not claim"} the watch until ${at(until)}, fetches the event and ` +
        `compares it with the document's winner: ${verdict}.`)
    }
    const state = (await store.getDocumentWriteStates([document.documentID])).get(document.documentID)
    const stillDue = (await store.listDueOperations(Date.now(), {})).operations.some((row) => row.operationID === key.operationID)
    say(`The document's write state is ${state}; the due sweep has ${stillDue ? "still" : "nothing more"} to do for it.`)
    const applied = provider.ledger.filter((e) => e.applied).length
    say(`At the provider: ${provider.ledger.length} requests for this edit, ${applied} applied. The edit landed exactly once.`)
  } finally {
    await store.close()
  }
  const width = Math.max(...steps.map((s) => relative(s.atMs).length))
  const text = [
    `One write-back, step by step (${describeDatabase(options.database)}; times since the start)`,
    "",
    ...steps.map((s) => `${relative(s.atMs).padStart(width)}  ${s.meaning}`)
  ].join("\n")
  return { steps, text }
}
