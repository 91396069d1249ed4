import type { Effect } from "effect"
import type { ConnectorStore } from "../service/ConnectorStore.js"

/** Runs one call of the Effect API as a Promise (rejecting with the tagged error). */
export type PromiseCall = <A, E>(use: (store: ConnectorStore["Type"]) => Effect.Effect<A, E>) => Promise<A>
