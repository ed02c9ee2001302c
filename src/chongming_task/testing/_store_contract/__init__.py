"""Parts of :class:`chongming_task.testing.store_contract.StoreContract`, one file per topic."""
