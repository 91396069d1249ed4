import { Clock, Effect } from "effect"
import type { InvalidInput, PersistenceError } from "../errors.js"
import { OperationEntropy } from "../operation/entropy.js"
import {
  decodeOperatorActionCursor,
  encodeOperatorActionCursor,
  OPERATOR_ACTION,
  OPERATOR_ACTION_FILTER,
  type OperatorAction,
  type OperatorActionFilter,
  type OperatorActionInput
} from "../operator/actions.js"
import { OperatorRepository } from "../ports/OperatorRepository.js"
import { Transactor } from "../ports/Transactor.js"
import { taking, validated } from "../validation.js"
import { cursorOf, type OperatorPage, paged } from "./paging.js"

/** The audit log of people's actions on the store: written by operator pages, read by anyone who may see them. */
export interface OperatorActionMethods {
  /** Appends `entry` to the audit log with the store's time and a fresh id, and answers the entry as stored. */
  readonly recordOperatorAction: (entry: OperatorActionInput) => Effect.Effect<OperatorAction, InvalidInput | PersistenceError>
  /** A page of the audit log, newest first. */
  readonly listOperatorActions: (
    filter?: OperatorActionFilter
  ) => Effect.Effect<OperatorPage<OperatorAction>, InvalidInput | PersistenceError>
}

/** Builds the audit log methods over the operator port. */
export const makeOperatorActionMethods = Effect.gen(function*() {
  const operator = yield* OperatorRepository
  const { withTransaction } = yield* Transactor
  const entropy = yield* OperationEntropy

  const methods: OperatorActionMethods = {
    recordOperatorAction: taking("recordOperatorAction", ["entry"], [OPERATOR_ACTION.shape], (entry: OperatorActionInput) =>
      validated("recordOperatorAction", OPERATOR_ACTION.checks(entry), () =>
        Effect.flatMap(Clock.currentTimeMillis, (at) => {
          const stored: OperatorAction = {
            actionID: entropy.token(),
            at,
            actor: entry.actor,
            action: entry.action,
            targets: [...entry.targets],
            outcome: entry.outcome,
            answer: entry.answer
          }
          return Effect.as(withTransaction(operator.recordAction(stored)), stored)
        }))),

    listOperatorActions: taking("listOperatorActions", ["filter"], [OPERATOR_ACTION_FILTER.shape], (filter: OperatorActionFilter = {}) =>
      validated("listOperatorActions", OPERATOR_ACTION_FILTER.checks(filter), () =>
        Effect.flatMap(cursorOf("listOperatorActions", filter.cursor, decodeOperatorActionCursor), (after) =>
          paged(
            filter.limit,
            (limit) => operator.listActions({ actor: filter.actor, action: filter.action, limit, after }),
            encodeOperatorActionCursor
          ))))
  }
  return methods
})
