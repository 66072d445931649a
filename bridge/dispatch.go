package bridge
