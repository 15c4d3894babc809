// GATTClient: the ATT transaction engine and the GATT client procedures (Core Specification 5.4, Vol 3, Part G).
import ATTStack
