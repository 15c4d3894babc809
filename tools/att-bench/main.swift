// att-bench: the ATT codec benchmark.
import ATTStack
print("att-bench: under construction")
