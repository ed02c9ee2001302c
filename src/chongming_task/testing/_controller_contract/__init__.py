"""The controller contract's parts; import ``ControllerContract`` from ``controller_contract``."""
