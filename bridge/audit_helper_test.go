package bridge_test

import "github.com/flowbridge/flowbridge/sessionmap"

func auditAll() sessionmap.AuditFilter { return sessionmap.AuditFilter{} }
