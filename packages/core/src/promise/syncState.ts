import { Effect, Option, Redacted } from "effect"
import { InvalidInput } from "../errors.js"
import { PENDING_AUTH_SHAPE } from "../pendingauth/checks.js"
import type { PendingAuth, PendingAuthInput } from "../pendingauth/PendingAuth.js"
import type { ConsumePendingAuthOptions } from "../service/pendingAuth.js"
import type { SetSyncStateOptions, UpdateSyncProgressOptions } from "../service/syncState.js"
import type {
  SyncLeaseClaim,
  SyncLeaseHolder,
  SyncLeaseRenewal,
  SyncLeaseTerms
} from "../syncstate/lease.js"
import type { SyncProgressRecompute } from "../syncstate/progress.js"
import type { SyncStateInput } from "../syncstate/setState.js"
import type { SyncState, SyncStateEntry } from "../syncstate/SyncState.js"
import type { Millis } from "../watch/ProjectionWatch.js"
import { takeArguments } from "../validation.js"
import type { PromiseCall } from "./call.js"

/**
 * A pending authorization as the Promise API takes and gives it: the
 * original store's record, `{ state, codeVerifier, provider, ownerDID,
 * ownerWrappableDID?, controllerWrappableDID?, createdAt, redirectURL,
 * scopes, expiresAt }`, with the code verifier as a plain string (the caller
 * needs it for the token request). Inside the store it is `Redacted` all the same.
 */
export interface PendingAuthRecord extends Omit<PendingAuth, "codeVerifier" | "createdAt"> {
  readonly codeVerifier: string
  readonly createdAt: Millis
}

/**
 * What the Promise `createPendingAuth` takes: the original's record;
 * `createdAt` defaults to the store's clock, a wrappable DID may be `null`.
 */
export interface PendingAuthRecordInput extends Omit<PendingAuthInput, "codeVerifier"> {
  readonly codeVerifier: string
}

/** The sync-state, sync-lease and pending-OAuth methods of the Promise API. */
export interface PromiseSyncStateMethods {
  /**
   * The sync state of one connector and owner, or `null`.
   *
   * @throws InvalidInput, PersistenceError
   */
  getSyncState(connectorName: string, ownerDID: string): Promise<SyncState | null>
  /**
   * Writes the sync state whole; with `options.leaseToken`, only while that sync lease is held.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted, SyncLeaseLost
   */
  setSyncState(connectorName: string, ownerDID: string, state: SyncStateInput, options?: SetSyncStateOptions): Promise<SyncState>
  /**
   * Writes the checkpoint and recovery `recompute` derives from the stored state, re-reading and recomputing
   * on a lost race. `recompute` runs with no transaction held.
   *
   * @throws InvalidInput, PersistenceError, SyncProgressExhausted, SyncProgressRecomputeFailed, SyncLeaseLost
   */
  updateSyncProgress(
    connectorName: string,
    ownerDID: string,
    recompute: SyncProgressRecompute,
    options?: UpdateSyncProgressOptions
  ): Promise<SyncState>
  /**
   * Deletes the sync state of one connector and owner; `false` when there was none.
   *
   * @throws InvalidInput, PersistenceError
   */
  deleteSyncState(connectorName: string, ownerDID: string): Promise<boolean>
  /**
   * Every owner's sync state of one connector.
   *
   * @throws InvalidInput, PersistenceError
   */
  listSyncStatesForConnector(connectorName: string): Promise<ReadonlyArray<SyncStateEntry>>
  /**
   * Claims the one sync lease of a connector and owner, so a single process syncs it at a time; `busy` while
   * another holds it.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted
   */
  claimSyncLease(connectorName: string, ownerDID: string, terms: SyncLeaseTerms): Promise<SyncLeaseClaim>
  /**
   * Extends a held sync lease; `lost` once another process took it over.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted
   */
  renewSyncLease(lease: SyncLeaseHolder, terms: SyncLeaseTerms): Promise<SyncLeaseRenewal>
  /**
   * Gives a held sync lease up; `false` when it was no longer this holder's.
   *
   * @throws InvalidInput, PersistenceError, ConcurrentUpdateExhausted
   */
  releaseSyncLease(lease: SyncLeaseHolder): Promise<boolean>
  /**
   * Stores a pending OAuth authorization under its `state` until its callback consumes it or it expires.
   *
   * @throws InvalidInput, PendingAuthStateTaken (the `state` is in use), PersistenceError
   */
  createPendingAuth(record: PendingAuthRecordInput): Promise<void>
  /**
   * The record of `state`, once: `null` when unknown, already consumed or expired.
   *
   * @throws InvalidInput, PersistenceError
   */
  consumePendingAuth(state: string, options?: ConsumePendingAuthOptions): Promise<PendingAuthRecord | null>
  /**
   * Deletes the pending authorizations that expired before `cutoff`; how many.
   *
   * @throws InvalidInput, PersistenceError
   */
  deleteExpiredPendingAuth(cutoff: Millis): Promise<number>
}

const revealed = (record: PendingAuth): PendingAuthRecord => ({ ...record, codeVerifier: Redacted.value(record.codeVerifier) })

/**
 * Wraps the verifier before it enters the store; anything that is not a
 * string passes through for validation to refuse.
 */
const redacted = (record: PendingAuthRecordInput): PendingAuthInput | InvalidInput => {
  // Read once, as the Effect API reads it: the verifier wrapped is the one checked.
  const taken = takeArguments("createPendingAuth", ["record"], [PENDING_AUTH_SHAPE], [record])
  if (taken instanceof InvalidInput) return taken
  const snapshot = taken[0] as PendingAuthRecordInput
  return typeof snapshot === "object" && snapshot !== null && typeof snapshot.codeVerifier === "string"
    ? { ...snapshot, codeVerifier: Redacted.make(snapshot.codeVerifier) }
    : snapshot as never
}

/** The sync-state, sync-lease and pending-OAuth methods over `call`. */
export const promiseSyncStateMethods = (call: PromiseCall): PromiseSyncStateMethods => ({
  getSyncState: (connectorName, ownerDID) =>
    call((s) => Effect.map(s.getSyncState(connectorName, ownerDID), Option.getOrNull)),
  setSyncState: (connectorName, ownerDID, state, options) => call((s) => s.setSyncState(connectorName, ownerDID, state, options)),
  updateSyncProgress: (connectorName, ownerDID, recompute, options) =>
    call((s) => s.updateSyncProgress(connectorName, ownerDID, recompute, options)),
  deleteSyncState: (connectorName, ownerDID) => call((s) => s.deleteSyncState(connectorName, ownerDID)),
  listSyncStatesForConnector: (connectorName) => call((s) => s.listSyncStatesForConnector(connectorName)),
  claimSyncLease: (connectorName, ownerDID, terms) => call((s) => s.claimSyncLease(connectorName, ownerDID, terms)),
  renewSyncLease: (lease, terms) => call((s) => s.renewSyncLease(lease, terms)),
  releaseSyncLease: (lease) => call((s) => s.releaseSyncLease(lease)),
  createPendingAuth: (record) =>
    call((s) => {
      const input = redacted(record)
      return input instanceof InvalidInput ? Effect.fail(input) : s.createPendingAuth(input)
    }),
  consumePendingAuth: (state, options) =>
    call((s) => Effect.map(s.consumePendingAuth(state, options), (taken) => Option.getOrNull(Option.map(taken, revealed)))),
  deleteExpiredPendingAuth: (cutoff) => call((s) => s.deleteExpiredPendingAuth(cutoff))
})
