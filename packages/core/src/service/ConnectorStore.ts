import { Context, Effect, Layer, Option } from "effect"
import type { OperationRepository } from "../ports/OperationRepository.js"
import type { RelistRepository } from "../ports/RelistRepository.js"
import type { Transactor } from "../ports/Transactor.js"
import type { WatchRepository } from "../ports/WatchRepository.js"
import type { WinnerReader } from "../ports/WinnerReader.js"
import { makeCallGate, shutGate, withGate } from "./gate.js"
import { withApplyOf, withReadersOf } from "./winners.js"
import { instrumentApi } from "./instrument.js"
import { CallBounds, makeCallBoundary } from "./bound.js"
import { makeRelistRunMethods, type RelistRunMethods } from "./relist.js"
import { makeSweepCandidateMethods, type SweepCandidateMethods } from "./relistCandidates.js"
import { makeSweepMethods, type SweepMethods } from "./sweep.js"
import { makeOperationMethods, type OperationMethods } from "./operations.js"
import { makeWatchMethods, type WatchMethods } from "./watches.js"
import { makeSyncStateMethods, type SyncStateMethods } from "./syncState.js"
import { makePendingAuthMethods, type PendingAuthMethods } from "./pendingAuth.js"
import type { SyncStateRepository } from "../ports/SyncStateRepository.js"
import type { PendingAuthRepository } from "../ports/PendingAuthRepository.js"
import type { OperatorRepository } from "../ports/OperatorRepository.js"
import { makeOperatorMethods, type OperatorMethods } from "./operator.js"
import { makeWorkMethods, type WorkMethods } from "./work.js"
import { type DueClaimMethods, makeDueClaimMethods } from "./dueClaims.js"
import { makeLimitMethods, type LimitMethods } from "./limits.js"
import type { ProviderLimitRepository } from "../ports/ProviderLimitRepository.js"
import { makeOperatorActionMethods, type OperatorActionMethods } from "./operatorActions.js"

/** Everything the store's Effect API offers. */
export interface ConnectorStoreApi extends WatchMethods, SweepMethods, SyncStateMethods, PendingAuthMethods, RelistRunMethods,
  SweepCandidateMethods, OperationMethods, DueClaimMethods, OperatorMethods, WorkMethods, LimitMethods, OperatorActionMethods
{}

/** The ports the store runs on; an adapter provides all of them. */
export type StorePorts = Transactor | WatchRepository | OperationRepository | WinnerReader | SyncStateRepository | PendingAuthRepository
  | RelistRepository | OperatorRepository | ProviderLimitRepository

/** The connector store's Effect API over any adapter's ports: each read-decide-write is one transaction, retried on a lost race. */
export class ConnectorStore extends Context.Tag("@connector-store/core/ConnectorStore")<ConnectorStore, ConnectorStoreApi>() {
  /**
   * The store over the adapter's ports, every method instrumented (`instrumentApi`); once the scope closes, calls fail with
   * `StoreClosed` and the release waits for the running ones.
   */
  static readonly layer: Layer.Layer<ConnectorStore, never, StorePorts> = Layer.scoped(
    ConnectorStore,
    Effect.gen(function*() {
      const gate = makeCallGate()
      const parts = yield* withReadersOf(gate, Effect.all([
        makeWatchMethods,
        makeSweepMethods,
        makeSyncStateMethods,
        makePendingAuthMethods,
        makeRelistRunMethods,
        makeSweepCandidateMethods,
        makeOperationMethods,
        makeDueClaimMethods,
        makeOperatorMethods,
        makeLimitMethods,
        makeOperatorActionMethods
      ]))
      const work = yield* makeWorkMethods
      // Waits for work end first: they hold nothing, and the gate waits for every call it admitted.
      yield* Effect.addFinalizer(() => Effect.zipRight(Effect.sync(work.close), shutGate(gate)))
      const boundary = Option.getOrElse(yield* Effect.serviceOption(CallBounds), () => makeCallBoundary())
      return withGate(instrumentApi<ConnectorStoreApi>(withApplyOf(Object.assign({}, ...parts, work.methods), gate), gate, boundary), gate)
    })
  )
}
