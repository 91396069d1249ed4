import type { DocumentContent, SimulationPlan } from "./plan.js"
import { CalendarProvider, type Entity, type ProviderAnswer, type WriteRequest } from "./provider.js"
import type { SimClock } from "./clock.js"
import { digestOf, seeded } from "./random.js"

/** What a runner may ask of the world (the provider over the network, and the local document store). */
export interface WorldClient {
  write(request: WriteRequest): Promise<ProviderAnswer>
  /** A GET of one entity: the entity, or a status (404, 401, offline). */
  read(entityID: string): Promise<Entity | { readonly status: 401 | 404 | "offline" }>
  /** The document's converged local state (its winner digest), or null. */
  readWinner(documentID: string): Promise<string | null>
  /** The winners of many documents (absent: no readable winner), for the due sweep's audit. */
  readWinners(documentIDs: ReadonlyArray<string>): Promise<Readonly<Record<string, string | null>>>
  /** The device made the edit: the document's winner becomes the new content's digest (null: the user deleted it, no winner). */
  editLocally(documentID: string, content: DocumentContent | null): Promise<void>
  /** The write landed as `entity`: the device now knows that etag (the base of its next edit). */
  noteWritten(documentID: string, entity: Entity): Promise<void>
  /** The etag the device last saw for a document's entity, or null. */
  knownEtag(documentID: string): Promise<string | null>
  /** Counts one event (claims, crashes, outcomes, …) for the report. */
  count(name: string): void
  /** The crash site chosen for the next claim of an operation, or null (each claim draws once, in order). */
  crashSite(opIndex: number): Promise<CrashSite | null>
}

/** Where a runner dies during one write-back. */
export type CrashSite = "after-claim" | "after-mark-sent" | "during-request" | "after-response" | "stalls-past-lease"

/** Every crash site, in the order of the write-back. */
export const CRASH_SITES: ReadonlyArray<CrashSite> = [
  "after-claim",
  "after-mark-sent",
  "stalls-past-lease",
  "during-request",
  "after-response"
]

interface LocalDocument {
  content: DocumentContent | null
  winner: string | null
  etag: string | null
}

/** A period when the device has no network, relative to the run's start. */
export interface OfflineWindow {
  readonly fromMs: number
  readonly toMs: number
}

/** The fake world's schedule: when the network drops and when the OAuth grant expires (from the seed). */
export interface WorldSchedule {
  readonly offline: ReadonlyArray<OfflineWindow>
  readonly grantLifetimesMs: ReadonlyArray<number>
}

/** The schedule for a seed: offline windows of 80–200 ms every 0.6–1.4 s; grants that live 0.5–2.5 s. */
export const scheduleOf = (seed: string | number): WorldSchedule => {
  const draw = seeded(seed, "schedule")
  const offline: Array<OfflineWindow> = []
  let at = draw.int(300, 700)
  for (let i = 0; i < 200; i++) {
    const length = draw.int(80, 200)
    offline.push({ fromMs: at, toMs: at + length })
    at += length + draw.int(600, 1_400)
  }
  const grantLifetimesMs = Array.from({ length: 200 }, () => draw.int(500, 2_500))
  return { offline, grantLifetimesMs }
}

/**
 * The world outside the store: the provider, the network between the device
 * and it, the OAuth grant, and the local document store whose winners the
 * store reads. It lives in the main process; child processes reach it over
 * IPC. Every random decision is drawn from the seed.
 */
export class World implements WorldClient {
  readonly provider: CalendarProvider
  /** The run's clock: every time of the world, and of the tasks that act on it. */
  readonly clock: SimClock
  readonly schedule: WorldSchedule
  readonly counters = new Map<string, number>()
  readonly localDeletions: Array<{ readonly documentID: string; readonly entityID: string; readonly runID: string }> = []
  private readonly documents = new Map<string, LocalDocument>()
  /** Documents the user deleted: an ingress never brings them back. */
  private readonly deletedByUser = new Set<string>()
  private readonly claims = new Map<number, number>()
  private readonly startedAt: number
  private grantExpiresAt: number
  private grants = 0
  private networkForcedUp = false
  private readonly winnerListeners: Array<(documentID: string, winner: string | null) => void> = []

  constructor(
    readonly seed: string | number,
    readonly plan: SimulationPlan,
    readonly options: { readonly crashes: boolean; readonly faults: boolean; readonly clock: SimClock }
  ) {
    this.provider = new CalendarProvider(seed, options.faults ? undefined : () => ({ fault: "none", latencyMs: 1, retryAfterMs: 0 }))
    this.schedule = scheduleOf(seed)
    this.clock = options.clock
    this.startedAt = options.clock.now()
    this.grantExpiresAt = options.faults ? this.startedAt + this.schedule.grantLifetimesMs[0]! : Number.MAX_SAFE_INTEGER
    for (const document of plan.documents) {
      if (document.lossy) this.provider.markLossy(document.entityID)
      const entity = document.existsAtProvider
        ? this.provider.seedEntity(document.entityID, document.initialContent, document.documentID)
        : undefined
      this.documents.set(document.documentID, {
        content: entity?.content ?? null,
        winner: entity === undefined ? null : digestOf(entity.content),
        etag: entity?.etag ?? null
      })
    }
  }

  /** True while the device has no network. */
  isOffline(): boolean {
    if (this.networkForcedUp || !this.options.faults) return false
    const t = this.clock.now() - this.startedAt
    return this.schedule.offline.some((w) => t >= w.fromMs && t < w.toMs)
  }

  /** True once the OAuth grant has expired and no re-authorization replaced it. */
  isGrantExpired(): boolean {
    return this.clock.now() >= this.grantExpiresAt
  }

  /** The user completed a new consent: a fresh grant, living as long as the schedule says. */
  reauthorize(): void {
    this.grants++
    const lifetime = this.schedule.grantLifetimesMs[this.grants % this.schedule.grantLifetimesMs.length]!
    this.grantExpiresAt = this.networkForcedUp ? Number.MAX_SAFE_INTEGER : this.clock.now() + lifetime
  }

  /** Ends the faults of the world: the network stays up, and the next grant never expires (for the end of a run). */
  calm(): void {
    this.networkForcedUp = true
  }

  async write(request: WriteRequest): Promise<ProviderAnswer> {
    if (this.isOffline()) return this.refuse("offline")
    if (this.isGrantExpired()) return this.refuse(401)
    return this.provider.write(request, this.clock)
  }

  private refuse(status: 401 | "offline"): ProviderAnswer {
    this.count(status === 401 ? "network.unauthorized" : "network.offline")
    return { status }
  }

  async read(entityID: string): Promise<Entity | { readonly status: 401 | 404 | "offline" }> {
    if (this.isOffline()) return { status: "offline" }
    if (this.isGrantExpired()) return { status: 401 }
    return this.provider.read(entityID) ?? { status: 404 }
  }

  async readWinner(documentID: string): Promise<string | null> {
    return this.documents.get(documentID)?.winner ?? null
  }

  async readWinners(documentIDs: ReadonlyArray<string>): Promise<Readonly<Record<string, string | null>>> {
    const out: Record<string, string | null> = {}
    for (const id of documentIDs) out[id] = this.documents.get(id)?.winner ?? null
    return out
  }

  /** Calls `listener` on every change of a document's winner (to keep other processes' replicas current). */
  onWinnerChange(listener: (documentID: string, winner: string | null) => void): void {
    this.winnerListeners.push(listener)
  }

  /** Every document's winner now. */
  winners(): Record<string, string | null> {
    return Object.fromEntries([...this.documents].map(([id, d]) => [id, d.winner]))
  }

  private changed(documentID: string): void {
    const winner = this.documents.get(documentID)?.winner ?? null
    for (const listener of this.winnerListeners) listener(documentID, winner)
  }

  /** The document's local content, or null. */
  contentOf(documentID: string): DocumentContent | null {
    return this.documents.get(documentID)?.content ?? null
  }

  async editLocally(documentID: string, content: DocumentContent | null): Promise<void> {
    const document = this.documents.get(documentID)
    if (document === undefined) return
    document.content = content
    document.winner = content === null ? null : digestOf(content)
    if (content === null) this.deletedByUser.add(documentID)
    this.changed(documentID)
  }

  /** An ingress: the sync pulled the provider's state of a document; the winner becomes its digest. A document the user deleted stays deleted. */
  ingest(documentID: string, entity: Entity): string | null {
    const document = this.documents.get(documentID)
    if (document === undefined || this.deletedByUser.has(documentID)) return null
    document.content = entity.content
    document.winner = digestOf(entity.content)
    document.etag = entity.etag
    this.changed(documentID)
    return document.winner
  }

  /** The sweep confirmed the entity is gone: the local document is deleted. */
  deleteLocally(documentID: string, entityID: string, runID: string): void {
    this.documents.delete(documentID)
    this.changed(documentID)
    this.localDeletions.push({ documentID, entityID, runID })
  }

  async noteWritten(documentID: string, entity: Entity): Promise<void> {
    const document = this.documents.get(documentID)
    if (document !== undefined) document.etag = entity.etag
  }

  async knownEtag(documentID: string): Promise<string | null> {
    return this.documents.get(documentID)?.etag ?? null
  }

  count(name: string): void {
    this.counters.set(name, (this.counters.get(name) ?? 0) + 1)
  }

  async crashSite(opIndex: number): Promise<CrashSite | null> {
    const ordinal = (this.claims.get(opIndex) ?? 0) + 1
    this.claims.set(opIndex, ordinal)
    if (!this.options.crashes || ordinal > 3) return null
    const draw = seeded(this.seed, "crash", opIndex, ordinal)
    return draw.chance(0.18) ? draw.pick(CRASH_SITES) : null
  }
}
