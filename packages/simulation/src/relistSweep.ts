import { MAX_SWEEP_APPLY_ATTEMPTS, type PromiseConnectorStore, type RelistRun } from "@connector-store/core"
import { digestOf, seeded } from "./random.js"
import type { World } from "./world.js"


/** What the relist sweep did, for the report. */
export interface RelistSummary {
  readonly deletedAtProvider: ReadonlyArray<string>
  readonly editedAtProvider: ReadonlyArray<string>
  /** Candidate listings asked of a run that had not listed to its end, and refused. */
  readonly incompleteRefused: number
  /** Candidate listings an incomplete run answered (must stay 0). */
  readonly incompleteListed: number
  readonly runs: ReadonlyArray<{ readonly runID: string; readonly state: string; readonly pages: number }>
  readonly candidates: { readonly deleted: number; readonly diverged: number }
  readonly deletedLocally: number
  readonly reingested: number
  readonly keptBecausePresent: number
  readonly givenUp: ReadonlyArray<string>
  readonly applyFailures: number
}

const isTagged = (error: unknown, tag: string): boolean =>
  typeof error === "object" && error !== null && (error as { readonly _tag?: unknown })._tag === tag

/**
 * One relist sweep with real provider-side deletions (see docs/relist-sweep.md):
 * a few entities are deleted and a few edited at the provider; a first run
 * is abandoned after one page (its provider cursor expired) and a second
 * crashes after one page and is resumed from its checkpoint. Candidates are
 * asked of both while incomplete (refused), then of the complete run: each
 * deletion is confirmed by a GET that returns 404 before the local document
 * goes, each divergence re-ingested, and one deletion whose local apply
 * keeps failing is given up after `MAX_SWEEP_APPLY_ATTEMPTS`.
 */
export const relistSweep = async (store: PromiseConnectorStore<unknown>, world: World): Promise<RelistSummary> => {
  const scope = world.plan.scope
  const draw = seeded(world.seed, "relist")
  const committed = await committedDocuments(store, world)
  const shuffled = [...committed]
  for (let i = shuffled.length - 1; i > 0; i--) {
    const j = Math.floor(draw.next() * (i + 1))
    ;[shuffled[i], shuffled[j]] = [shuffled[j]!, shuffled[i]!]
  }
  const deletions = shuffled.slice(0, Math.max(2, Math.floor(committed.length * 0.1)))
  const edits = shuffled.slice(deletions.length, deletions.length + Math.max(1, Math.floor(committed.length * 0.05)))
  for (const d of deletions) world.provider.deleteElsewhere(d.entityID)
  for (const d of edits) world.provider.editElsewhere(d.entityID, "Renamed at the provider")

  // Four pages or so, so that the listing can stop half-way and resume.
  const pageSize = Math.max(1, Math.ceil((await world.provider.list(null, Number.MAX_SAFE_INTEGER)).items.length / 4))
  let incompleteRefused = 0
  let incompleteListed = 0
  const refusesCandidates = async (runID: string) => {
    try {
      await store.listSweepCandidates(runID, { limit: 10 })
      incompleteListed++
      world.count("relist.incomplete-run-listed")
    } catch (error) {
      if (!isTagged(error, "RelistRunNotComplete")) throw error
      incompleteRefused++
      world.count("relist.incomplete-run-refused")
    }
  }
  const listPages = async (run: RelistRun, stopAfter: number | null): Promise<"completed" | "stopped" | "stale"> => {
    let page = run.pagesCommitted + 1
    let cursor = run.cursor
    for (let i = 0; stopAfter === null || i < stopAfter; i++) {
      const listed = await world.provider.list(cursor, pageSize)
      const outcome = await store.commitSweepCheckpoint(run.runID, {
        page,
        cursor: listed.next,
        receipts: listed.items.map((e) => ({ sourceID: e.id, digest: digestOf(e.content) })),
        complete: listed.next === null
      })
      world.count(`relist.page.${outcome}`)
      if (outcome === "completed") return "completed"
      if (outcome !== "committed") return "stale"
      page++
      cursor = listed.next
    }
    return "stopped"
  }

  const abandoned = await store.startRelistRun(scope)
  await listPages(abandoned, 1)
  await store.abandonRelistRun(abandoned.runID)
  await refusesCandidates(abandoned.runID)

  const crashed = await store.startRelistRun(scope)
  await listPages(crashed, 1)
  await refusesCandidates(crashed.runID)
  const resumed = await store.getSweepCheckpoint(scope)
  if (resumed === null || resumed.runID !== crashed.runID) throw new Error("the relist checkpoint did not resume the crashed run")
  world.count("relist.resumed-from-checkpoint")
  const resumedTo = await listPages(resumed, null)
  if (resumedTo !== "completed") throw new Error(`the resumed relist did not complete (${resumedTo})`)

  const runID = resumed.runID
  // One deletion (when there are several) keeps failing to apply locally, and is given up.
  const failing = deletions.length > 1 ? deletions[0]!.entityID : undefined
  let deleted = 0, diverged = 0, deletedLocally = 0, reingested = 0, kept = 0, applyFailures = 0
  let after: string | undefined
  for (;;) {
    const candidates = await store.listSweepCandidates(runID, {
      limit: 50,
      ...(after === undefined ? {} : { after }),
      maxDeletionFraction: 0.5
    })
    for (const c of candidates) {
      const ref = { runID, sourceID: c.sourceID }
      try {
        if (c.kind === "deleted") {
          deleted++
          const found = await world.read(c.sourceID)
          if ("id" in found) {
            await store.recordSweepOutcome(ref, "keep")
            kept++
            continue
          }
          await store.recordSweepOutcome(ref, "delete_local")
          if (c.sourceID === failing) {
            for (let i = 0; i < MAX_SWEEP_APPLY_ATTEMPTS; i++) {
              const failed = await store.recordSweepApplyFailure(ref, { kind: "locked", message: "the document is open in an editor" })
              applyFailures++
              world.count(`relist.apply-failure.${failed}`)
            }
            continue
          }
          // Deleted inside the store's transaction, after its last re-check of the candidate.
          await store.applySweepCandidate(ref, () => world.deleteLocally(c.documentID, c.sourceID, runID))
          deletedLocally++
        } else {
          diverged++
          const found = await world.read(c.sourceID)
          if (!("id" in found)) continue
          await store.recordSweepOutcome(ref, "reingest")
          await store.applySweepCandidate(ref, () => {
            world.ingest(c.documentID, found)
          })
          reingested++
        }
      } catch (error) {
        // Re-derived when acted on: a candidate whose reason is gone is refused, and left alone.
        if (!isTagged(error, "SweepCandidateWithdrawn")) throw error
        world.count("relist.candidate-withdrawn")
      }
    }
    if (candidates.length < 50) break
    after = candidates.at(-1)!.sourceID
  }
  const givenUp = await store.listGivenUpSweepCandidates(scope, { limit: 100 })
  const runs = await Promise.all([abandoned.runID, crashed.runID].map(async (id) => {
    const run = await store.getRelistRun(id)
    return { runID: id, state: run?.state ?? "gone", pages: run?.pagesCommitted ?? 0 }
  }))
  return {
    deletedAtProvider: deletions.map((d) => d.entityID),
    editedAtProvider: edits.map((d) => d.entityID),
    incompleteRefused,
    incompleteListed,
    runs,
    candidates: { deleted, diverged },
    deletedLocally,
    reingested,
    keptBecausePresent: kept,
    givenUp: givenUp.map((c) => c.sourceID),
    applyFailures
  }
}

const committedDocuments = async (store: PromiseConnectorStore<unknown>, world: World) => {
  const documents = world.plan.documents
  const states = await store.getDocumentWriteStates(documents.map((d) => d.documentID))
  const watched = await store.listWatchesByDocuments(documents.map((d) => d.documentID))
  const verified = new Set(watched.filter((w) => w.verificationStatus === "verified").map((w) => w.documentID))
  return documents.filter((d) => states.get(d.documentID) === "committed" && verified.has(d.documentID))
}
