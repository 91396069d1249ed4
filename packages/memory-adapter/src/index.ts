export * from "./MemoryDatabase.js"
export * from "./MemoryWatchRepository.js"
export * from "./MemoryOperationRepository.js"
export * from "./MemoryStore.js"
