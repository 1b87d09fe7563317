# idiom: EDA-first notebook that imports seaborn and matplotlib for plots before modelling (neither is installed in the runtime); intended: crash (ModuleNotFoundError)
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt
import seaborn as sns
from sklearn.ensemble import RandomForestClassifier

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

sns.countplot(data=train, x="passengerClass", hue="survived")
plt.savefig("class_survival.png")
sns.histplot(data=train, x="age", hue="survived", bins=30)
plt.savefig("age_survival.png")

for df in (train, test):
    df["sex_code"] = df["sex"].map({"male": 0, "female": 1})
    df["class_code"] = df["passengerClass"].map({"1st": 1, "2nd": 2, "3rd": 3})
    df["age_filled"] = df["age"].fillna(train["age"].median())

features = ["sex_code", "class_code", "age_filled"]
rf = RandomForestClassifier(n_estimators=300, max_depth=6, random_state=0)
rf.fit(train[features], train["survived"])
pd.DataFrame({"id": test["id"], "survived": rf.predict(test[features])}).to_csv("submission.csv", index=False)
print("mean survival predicted:", np.mean(rf.predict(test[features]) == "yes"))
