// The adapter entry, `@connector-store/core/adapter`, as code outside the
// workspace imports it: its names resolve with their types, they are the
// very objects the installed adapters use (the memory store's direct lane is
// found under this entry's tag), and the main entry does not carry them.
// Imported by memory.ts.
import * as Core from "@connector-store/core"
import type { PromiseConnectorStore } from "@connector-store/core"
import {
  countLostRaceNow,
  DirectDatabase,
  type DirectDatabaseApi,
  LostRace,
  makePromiseStore,
  TurnQueue,
  retryOnLostRace
} from "@connector-store/core/adapter"
import { Effect, Option } from "effect"

const ADAPTER_ONLY = ["countLostRaceNow", "DirectDatabase", "LostRace", "makePromiseStore", "TurnQueue", "retryOnLostRace"]

/** Fails unless the adapter entry is whole, apart from the main entry, and shared with the adapter behind `store`. */
export const checkAdapterEntry = async <H>(store: PromiseConnectorStore<H>): Promise<void> => {
  const leaked = ADAPTER_ONLY.filter((name) => name in Core)
  if (leaked.length > 0) throw new Error(`the main entry exports ${leaked.join(", ")}`)
  for (const [name, value] of Object.entries({ countLostRaceNow, makePromiseStore, TurnQueue, retryOnLostRace })) {
    if (typeof value !== "function") throw new Error(`@connector-store/core/adapter: ${name} is ${typeof value}`)
  }
  if (new LostRace()._tag !== "LostRace") throw new Error("@connector-store/core/adapter: LostRace is not the tagged error")
  const direct: Option.Option<DirectDatabaseApi> = await store.runEffect(Effect.serviceOption(DirectDatabase))
  if (Option.isNone(direct)) throw new Error("the memory store provides no DirectDatabase under the adapter entry's tag")
}
