import type { PromiseConnectorStore } from "@connector-store/core"
import type { SimulationScope } from "./plan.js"
import { digestOf, seeded, seededToken } from "./random.js"
import type { World } from "./world.js"

/** How long a sync lease lasts. */
const SYNC_LEASE_MS = 1_000

/** A page of the sync's listing. */
const SYNC_PAGE = 25

/**
 * Reconnect: when the network comes back, every operation and watch deferred
 * for `offline` becomes due now (`resumeOfflineDeferred`). Called on each
 * tick; it resumes on the transition, and again now and then for deferrals
 * recorded by runners whose request had left just before the network came back.
 */
export const makeConnectivityMonitor = (store: PromiseConnectorStore<unknown>, world: World) => {
  let wasOffline = false
  let lastResume = 0
  return async () => {
    const offline = world.isOffline()
    if (offline && !wasOffline) world.count("network.went-offline")
    const now = world.clock.now()
    if (!offline && (wasOffline || now - lastResume > 250)) {
      await store.resumeOfflineDeferred(now)
      if (wasOffline) world.count("resume.offline")
      lastResume = now
    }
    wasOffline = offline
  }
}

const UNRESERVED = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
const consents = new WeakMap<World, number>()

/**
 * The `state` and PKCE code verifier (64 unreserved characters) of the
 * world's next consent, drawn from the seed and the run's tag, so a run
 * repeats and two runs on one database never share a state.
 */
const nextConsent = (world: World): { readonly state: string; readonly codeVerifier: string } => {
  const n = (consents.get(world) ?? 0) + 1
  consents.set(world, n)
  const draw = seeded(world.seed, "consent", world.plan.runTag, n)
  return { state: seededToken(draw, 32), codeVerifier: seededToken(draw, 64, UNRESERVED) }
}

/**
 * Re-auth: when the grant has expired, the user goes through consent again.
 * The authorize redirect stores a pending authorization, the callback
 * consumes it (once: a replayed callback gets nothing), the world issues a
 * new grant, and every operation and watch deferred for `auth` on this
 * connector becomes due (`resumeAuthDeferred`).
 */
export const makeAuthMonitor = (store: PromiseConnectorStore<unknown>, world: World, scope: SimulationScope) => {
  let lastResume = 0
  const resume = () =>
    store.resumeAuthDeferred({ ownerDID: scope.ownerDID, connectorNames: [scope.connectorName], now: world.clock.now() })
  return async () => {
    if (world.isGrantExpired()) {
      world.count("oauth.grant-expired")
      const { state, codeVerifier } = nextConsent(world)
      const now = world.clock.now()
      await store.createPendingAuth({
        state,
        provider: scope.connectorName,
        ownerDID: scope.ownerDID,
        codeVerifier,
        redirectURL: "https://app.example/oauth/callback",
        scopes: ["calendar.events"],
        expiresAt: now + 60_000
      })
      world.count("oauth.pending-created")
      const taken = await store.consumePendingAuth(state)
      world.count(taken === null ? "oauth.callback-lost" : "oauth.callback-consumed")
      const replay = await store.consumePendingAuth(state)
      world.count(replay === null ? "oauth.replayed-callback-refused" : "oauth.replayed-callback-accepted")
      if (taken === null) return
      world.reauthorize()
      await resume()
      world.count("resume.auth")
      lastResume = world.clock.now()
    } else if (world.clock.now() - lastResume > 250) {
      await resume()
      lastResume = world.clock.now()
    }
  }
}

/**
 * An authorization the user abandoned (closed the consent page): it expires
 * and `deleteExpiredPendingAuth` removes it; consuming it afterwards gets nothing.
 */
export const abandonedAuthorization = async (store: PromiseConnectorStore<unknown>, world: World, scope: SimulationScope) => {
  const { state, codeVerifier } = nextConsent(world)
  const createdAt = world.clock.now() - 120_000
  await store.createPendingAuth({
    state,
    provider: scope.connectorName,
    ownerDID: scope.ownerDID,
    codeVerifier,
    redirectURL: "https://app.example/oauth/callback",
    scopes: ["calendar.events"],
    createdAt,
    expiresAt: createdAt + 60_000
  })
  const removed = await store.deleteExpiredPendingAuth(world.clock.now())
  for (let i = 0; i < removed; i++) world.count("oauth.expired-deleted")
  const late = await store.consumePendingAuth(state)
  world.count(late === null ? "oauth.expired-callback-refused" : "oauth.expired-callback-accepted")
}

/**
 * One incremental sync by `worker`: take the sync lease (another worker
 * holding it → busy), page through the provider, pull every entity changed
 * elsewhere into its document (an ingress: the winner moves and the watch is
 * armed with `armWatch(…, "ingress")`), checkpoint each page with
 * `updateSyncProgress`, renew the lease per page, then record the report and
 * release the lease. Every sync-state write is fenced by the lease's token:
 * a worker whose lease was taken over stops at its next write
 * (`SyncLeaseLost`) instead of overwriting the new holder's checkpoint.
 * Documents with a write in flight are left for later.
 */
export const syncOnce = async (store: PromiseConnectorStore<unknown>, world: World, scope: SimulationScope, worker: string) => {
  const { connectorName, ownerDID } = scope
  const claim = await store.claimSyncLease(connectorName, ownerDID, { now: world.clock.now(), leaseMs: SYNC_LEASE_MS })
  if (claim.outcome !== "claimed") return world.count("sync.lease-busy")
  world.count(`sync.lease-claimed.${worker}`)
  const lease = claim.lease
  const fenced = { leaseToken: lease.token }
  const documentOf = new Map(world.plan.documents.map((d) => [d.entityID, d.documentID]))
  let cursor: string | null = null
  let page = 0
  let entities = 0
  try {
    for (;;) {
      if (world.isOffline() || world.isGrantExpired()) {
        await store.setSyncState(connectorName, ownerDID, { status: "error", lastSyncedAt: "", entityCount: entities, error: "provider unreachable" }, fenced)
        return world.count("sync.interrupted")
      }
      const listed = await world.provider.list(cursor, SYNC_PAGE)
      page++
      entities += listed.items.length
      const documentIDs = listed.items.flatMap((e) => documentOf.get(e.id) ?? [])
      const writeStates = await store.getDocumentWriteStates(documentIDs)
      for (const entity of listed.items) {
        const documentID = documentOf.get(entity.id)
        if (documentID === undefined || writeStates.get(documentID) === "pending") continue
        if (entity.etag === (await world.knownEtag(documentID))) continue
        if (digestOf(entity.content) === (await world.readWinner(documentID))) continue
        const winner = world.ingest(documentID, entity)
        const armed = await store.armWatch({ ...scope, sourceID: entity.id }, "ingress", { dueAt: world.clock.now(), triggeringWinner: winner })
        world.count(`sync.ingress.${armed}`)
      }
      const next = listed.next
      await store.updateSyncProgress(connectorName, ownerDID, () => ({ checkpoint: { cursor: next, page }, recovery: null }), fenced)
      world.count("sync.page-checkpointed")
      const renewed = await store.renewSyncLease(lease, { now: world.clock.now(), leaseMs: SYNC_LEASE_MS })
      if (renewed.outcome !== "renewed") return world.count("sync.lease-lost")
      if (next === null) break
      cursor = next
    }
    await store.setSyncState(connectorName, ownerDID, {
      status: "idle",
      lastSyncedAt: new Date(world.clock.now()).toISOString(),
      entityCount: entities
    }, fenced)
    world.count("sync.completed")
  } catch (error) {
    // Taken over since the last renewal: the new holder's checkpoint stands.
    if ((error as { readonly _tag?: unknown })._tag !== "SyncLeaseLost") throw error
    world.count("sync.lease-lost")
  } finally {
    await store.releaseSyncLease(lease)
  }
}

/**
 * Someone edits an entity in the provider's own UI: one document whose
 * writes have all finished (drawn from the seed per tick).
 */
export const editElsewhere = async (store: PromiseConnectorStore<unknown>, world: World, tick: number) => {
  const draw = seeded(world.seed, "edit-elsewhere", tick)
  const document = draw.pick(world.plan.documents)
  const state = (await store.getDocumentWriteStates([document.documentID])).get(document.documentID)
  if (state !== "committed") return
  if (world.provider.editElsewhere(document.entityID, `Moved by a colleague (${tick})`) !== undefined) {
    world.count("provider.edited-elsewhere")
  }
}
