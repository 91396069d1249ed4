import { type PromiseConnectorStore, watchIdentityOf } from "@connector-store/core"
import { digestOf } from "./random.js"
import type { World } from "./world.js"

/** Verification attempts before a watch is given up as `repair_failed`. */
export const MAX_VERIFICATIONS = 3

/** How long a verifier's claim on a watch lasts. */
const CLAIM_MS = 500

/** How far a verification deferred for offline or auth is pushed, unless a resume comes first. */
const DEFER_MS = 10_000

/**
 * One pass of the verifier over the due watches of the run's owner. A
 * pending watch is claimed, the provider's entity fetched and compared with
 * the document's winner (`recordVerification`); a mismatch whose provider
 * etag is news to the device is repaired by pulling the provider's state
 * (the next verification then matches); a mismatch with nothing new to pull
 * goes on until it is given up. Offline or an expired grant defers the
 * watch for that reason. A verified or given-up watch whose winner moved
 * (the audit branch) is re-armed by ingress. Documents with a write in
 * flight are left alone: that write's finalize re-arms their watch.
 */
export const verifyDueWatches = async (store: PromiseConnectorStore<unknown>, world: World, ownerDID: string) => {
  const now = world.clock.now()
  const due = await store.listDueOperations(now, {})
  const watches = due.watches.filter((w) => w.ownerDID === ownerDID)
  if (watches.length === 0) return 0
  const writeStates = await store.getDocumentWriteStates([...new Set(watches.map((w) => w.documentID))])
  for (const watch of watches) {
    if (writeStates.get(watch.documentID) === "pending") continue
    const id = watchIdentityOf(watch)
    if (watch.verificationStatus !== "pending_verification") {
      const armed = await store.armWatch(id, "ingress", {
        dueAt: now,
        triggeringWinner: await world.readWinner(watch.documentID)
      })
      world.count(`watch.audit-arm.${armed}`)
      continue
    }
    const until = now + CLAIM_MS
    const generation = watch.repairGeneration
    if (!(await store.claimWatchAttempt(id, { until, generation, now }))) {
      world.count("watch.claim-refused")
      continue
    }
    const fetched = await world.read(watch.sourceID)
    if ("status" in fetched && fetched.status !== 404) {
      const reason = fetched.status === "offline" ? "offline" : "auth"
      const deferred = await store.deferWatch(id, { nextAttemptAt: world.clock.now() + DEFER_MS, reason, generation, claimedUntil: until })
      world.count(`watch.deferred.${reason}.${deferred}`)
      continue
    }
    const entity = "id" in fetched ? fetched : undefined
    const outcome = await store.recordVerification(id, {
      generation,
      claimedUntil: until,
      fetchedDigest: entity === undefined ? null : digestOf(entity.content),
      maxAttempts: MAX_VERIFICATIONS,
      dueAt: world.clock.now() + 20
    })
    world.count(`watch.verification.${outcome}`)
    if (outcome === "pending" && entity !== undefined) {
      if (entity.etag !== (await world.knownEtag(watch.documentID))) {
        world.ingest(watch.documentID, entity)
        world.count("watch.repair.pulled-provider-state")
      } else {
        world.count("watch.repair.nothing-to-pull")
      }
    }
  }
  return watches.length
}
