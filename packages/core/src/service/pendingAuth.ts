import { Clock, Effect, type Option } from "effect"
import type { CorruptRow, InvalidInput, PersistenceError } from "../errors.js"
import { PENDING_AUTH_SHAPE, pendingAuthChecks } from "../pendingauth/checks.js"
import { PendingAuthStateTaken } from "../pendingauth/errors.js"
import { decideConsume, type PendingAuth, type PendingAuthInput } from "../pendingauth/PendingAuth.js"
import { PendingAuthRepository } from "../ports/PendingAuthRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { fieldsOf, optional, Rules, taking, validate, validated } from "../validation.js"
import type { Millis } from "../watch/ProjectionWatch.js"

/** The options of `consumePendingAuth`. */
export interface ConsumePendingAuthOptions {
  /** The time the callback arrived; the store's clock when absent. */
  readonly now?: Millis | undefined
}

/** The options of `consumePendingAuth`. */
const CONSUME_OPTIONS = fieldsOf<ConsumePendingAuthOptions>("options", { now: optional(Rules.millis) }, { record: optional(Rules.record) })

/** The pending-OAuth half of the store's Effect API. */
export interface PendingAuthMethods {
  /** Stores a pending authorization; a `state` already in use fails with `PendingAuthStateTaken`. */
  readonly createPendingAuth: (
    record: PendingAuthInput
  ) => Effect.Effect<void, InvalidInput | PendingAuthStateTaken | PersistenceError>
  /**
   * Removes and returns the record of `state`, once: an expired one is removed but not returned; a row that does not decode
   * stays, and the call fails.
   */
  readonly consumePendingAuth: (
    state: string,
    options?: ConsumePendingAuthOptions
  ) => Effect.Effect<Option.Option<PendingAuth>, InvalidInput | PersistenceError | CorruptRow>
  /** Removes every record that expired strictly before `cutoff`; returns how many. */
  readonly deleteExpiredPendingAuth: (cutoff: Millis) => Effect.Effect<number, InvalidInput | PersistenceError>
}

/** Builds the pending-OAuth methods over the ports. */
export const makePendingAuthMethods = Effect.gen(function*() {
  const repo = yield* PendingAuthRepository
  const { withTransaction } = yield* Transactor

  const methods: PendingAuthMethods = {
    createPendingAuth: taking("createPendingAuth", ["record"], [PENDING_AUTH_SHAPE], (record: PendingAuthInput) =>
      Effect.gen(function*() {
        yield* validate("createPendingAuth", pendingAuthChecks(record))
        const createdAt = record.createdAt ?? (yield* Clock.currentTimeMillis)
        // Only the record's own fields are kept: nothing else a caller passes along is stored.
        const stored: PendingAuth = {
          state: record.state,
          codeVerifier: record.codeVerifier,
          provider: record.provider,
          ownerDID: record.ownerDID,
          ...(typeof record.ownerWrappableDID === "string" ? { ownerWrappableDID: record.ownerWrappableDID } : {}),
          ...(typeof record.controllerWrappableDID === "string" ? { controllerWrappableDID: record.controllerWrappableDID } : {}),
          createdAt,
          redirectURL: record.redirectURL,
          scopes: Array.from(record.scopes),
          expiresAt: record.expiresAt
        }
        if (!(yield* repo.insert(stored))) return yield* new PendingAuthStateTaken({ state: record.state })
      })),

    consumePendingAuth: taking("consumePendingAuth", ["state", "options"], [undefined, CONSUME_OPTIONS.shape], (
      state: string,
      options?: ConsumePendingAuthOptions
    ) =>
      Effect.gen(function*() {
        yield* validate("consumePendingAuth", CONSUME_OPTIONS.checks(options, [["state", state, Rules.id]]))
        const now = options?.now ?? (yield* Clock.currentTimeMillis)
        // In a transaction: a take that cannot decode what it deleted fails, and the rollback puts the row back.
        return decideConsume(yield* withTransaction(repo.take(state)), now)
      })),

    deleteExpiredPendingAuth: (cutoff) =>
      validated("deleteExpiredPendingAuth", [["cutoff", cutoff, Rules.millis]], () => repo.deleteExpiredBefore(cutoff))
  }
  return methods
})
