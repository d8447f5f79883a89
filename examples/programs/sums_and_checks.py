# Sequential dependent calls: each step needs the previous answer.
import math

total = 0
for n in range(1, 6):
    total = (await tools.add(a=total, b=n * n))["sum"]
print("sum of squares 1..5 =", total)
assert total == sum(n * n for n in range(1, 6))
return {"sum_of_squares": total, "sqrt": round(math.sqrt(total), 4)}
